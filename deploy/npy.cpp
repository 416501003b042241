#include "deploy/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace kiln::deploy {

using ::kiln::detail::concat;

namespace {

struct DescrMap {
  const char *descr;
  DType dtype;
};

const DescrMap kDescrs[] = {
    {"<f4", DType{DType::Float, 32, 1}}, {"<f8", DType{DType::Float, 64, 1}}, {"<f2", DType{DType::Float, 16, 1}},
    {"|i1", DType{DType::Int, 8, 1}},    {"<i2", DType{DType::Int, 16, 1}},   {"<i4", DType{DType::Int, 32, 1}},
    {"<i8", DType{DType::Int, 64, 1}},   {"|u1", DType{DType::UInt, 8, 1}},   {"<u2", DType{DType::UInt, 16, 1}},
    {"<u4", DType{DType::UInt, 32, 1}},  {"<u8", DType{DType::UInt, 64, 1}},  {"|b1", DType{DType::UInt, 1, 1}},
};

// The value of `key` in the header dict, as text up to the next top-level ',' or '}'.
std::string header_value(const std::string &h, const std::string &key, const std::string &name) {
  const std::string quoted1 = "'" + key + "'", quoted2 = "\"" + key + "\"";
  size_t p = h.find(quoted1);
  if (p == std::string::npos) p = h.find(quoted2);
  if (p == std::string::npos) throw NpyError(concat(name, ": the .npy header has no '", key, "'"));
  p = h.find(':', p);
  if (p == std::string::npos) throw NpyError(concat(name, ": malformed .npy header"));
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  int depth = 0;
  for (; e < h.size(); ++e) {
    const char c = h[e];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return h.substr(p, e - p);
}

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::string &name) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw NpyError(concat(name, ": not a .npy file (bad magic)"));
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw NpyError(concat(name, ": truncated .npy header"));
    header_len = 0;
    for (int k = 0; k < 4; ++k) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + k])) << (8 * k);
    offset = 12;
  } else {
    throw NpyError(concat(name, ": .npy format version ", static_cast<int>(major), " is not supported"));
  }
  if (header_len > (1u << 20) || offset + header_len > bytes.size())
    throw NpyError(concat(name, ": truncated .npy header"));
  const std::string h(bytes.substr(offset, header_len));
  std::string descr = header_value(h, "descr", name);
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) descr = descr.substr(1, descr.size() - 2);
  if (descr == "=f4" || descr == "<f4") descr = "<f4";
  const DescrMap *dm = nullptr;
  for (const auto &m : kDescrs) {
    std::string alt = m.descr;
    if (descr == alt || (alt[0] == '<' && descr == "=" + alt.substr(1)) ||
        (alt[0] == '|' && descr == "<" + alt.substr(1)))
      dm = &m;
  }
  if (!dm) throw NpyError(concat(name, ": dtype '", descr, "' is not supported (little-endian numbers and bool only)"));
  const std::string fortran = header_value(h, "fortran_order", name);
  if (fortran.find("True") != std::string::npos)
    throw NpyError(concat(name, ": Fortran-ordered arrays are not supported (save with np.ascontiguousarray)"));
  std::string shape_text = header_value(h, "shape", name);
  std::vector<int64_t> shape;
  {
    std::string digits;
    for (char c : shape_text) {
      if (c >= '0' && c <= '9') {
        digits += c;
        if (digits.size() > 15) throw NpyError(concat(name, ": a dimension in the .npy header is too large"));
      } else if (c == ',' || c == ')') {
        if (!digits.empty()) shape.push_back(std::stoll(digits));
        digits.clear();
      } else if (c != '(' && c != ' ' && c != 'L') {
        throw NpyError(concat(name, ": malformed shape ", shape_text));
      }
    }
    if (!digits.empty()) shape.push_back(std::stoll(digits));
  }
  const size_t data_offset = offset + header_len;
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d > 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d) / 8)
      throw NpyError(concat(name, ": the shape overflows"));
    n *= static_cast<uint64_t>(d);
  }
  const uint64_t need = n * dm->dtype.bytes();
  if (bytes.size() - data_offset < need)
    throw NpyError(concat(name, ": holds ", bytes.size() - data_offset, " bytes of data, the header says ", need));
  Tensor t = Tensor::empty(shape, dm->dtype);
  if (need) std::memcpy(t.data(), bytes.data() + data_offset, need);
  return t;
}

Tensor read_npy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NpyError(concat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_npy(ss.str(), path);
}

std::string to_npy(const Tensor &t) {
  const char *descr = nullptr;
  for (const auto &m : kDescrs) {
    if (m.dtype == t.dtype()) descr = m.descr;
  }
  if (!descr) throw NpyError(concat("a tensor of ", t.dtype().to_string(), " cannot be written as .npy"));
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < t.shape().size(); ++k)
    h << t.shape()[k] << (t.shape().size() == 1 ? "," : (k + 1 < t.shape().size() ? ", " : ""));
  h << "), }";
  std::string header = h.str();
  // Pad with spaces and a newline so that the data starts at a multiple of 64.
  const bool v2 = header.size() + 11 > 65535;
  const size_t pre = v2 ? 12 : 10;
  size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const size_t len = header.size();
  if (v2) {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((len >> (8 * k)) & 0xff);
  } else {
    out += static_cast<char>(len & 0xff);
    out += static_cast<char>((len >> 8) & 0xff);
  }
  out += header;
  if (!t.is_contiguous()) throw NpyError("a non-contiguous tensor cannot be written as .npy");
  out.append(static_cast<const char *>(t.data()), t.nbytes());
  return out;
}

void write_npy(const std::string &path, const Tensor &t) {
  const std::string bytes = to_npy(t);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw NpyError(concat(path, ": cannot write: ", std::strerror(errno)));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      throw NpyError(concat(path, ": write failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw NpyError(concat(path, ": cannot write: ", std::strerror(e)));
  }
}

}  // namespace kiln::deploy
