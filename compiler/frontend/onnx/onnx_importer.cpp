#include "compiler/frontend/onnx/onnx_importer.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <set>
#include <sstream>

#include "compiler/driver/graph_executor.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/float16.h"

namespace kiln::frontend::onnx {

using graph::Attribute;
using graph::TensorType;
using graph::ValueId;
using ::kiln::detail::concat;

namespace {

// Files larger than protobuf's 2 GiB limit cannot hold a model; weights beyond it live in external
// data files.
constexpr int64_t kMaxModelFile = int64_t{2} << 30;

std::string read_file(const std::string &path, int64_t limit) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ImportError(concat(path, ": is a directory, not an ONNX file"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ImportError(concat(path, ": cannot open: ", std::strerror(errno)));
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0) throw ImportError(concat(path, ": cannot read its size"));
  if (size > limit)
    throw ImportError(concat(path, ": ", size, " bytes is more than the ", limit, " a model file may have"));
  f.seekg(0);
  std::string data(static_cast<size_t>(size), '\0');
  f.read(data.data(), size);
  if (!f) throw ImportError(concat(path, ": read failed"));
  return data;
}

template <class Message>
void parse_message(Message &m, std::string_view bytes, const std::string &what, const char *kind) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                            static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  in.SetTotalBytesLimit(INT_MAX);
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    throw ImportError(
        concat(what, ": not a valid ", kind, " (the protobuf does not parse; truncated or another format)"));
}

int64_t model_opset(const ::onnx::ModelProto &m, const std::string &what) {
  int64_t opset = -1;
  for (const auto &o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0) {
    if (m.opset_import_size() == 0) throw ImportError(concat(what, ": the model declares no opset"));
    opset = kMinOpset;  // only other domains: their ops are reported as unsupported
  }
  return opset;
}

std::string domain_of(const ::onnx::NodeProto &n) { return n.domain() == "ai.onnx" ? "" : n.domain(); }

std::vector<UnsupportedOp> find_unsupported(const ::onnx::GraphProto &g, int64_t opset) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const auto &n : g.node()) {
    const std::string dom = domain_of(n);
    if (!dom.empty() || !find_converter(n.op_type(), opset)) ++counts[{dom, n.op_type()}];
  }
  std::vector<UnsupportedOp> out;
  for (const auto &[k, c] : counts) out.push_back(UnsupportedOp{k.first, k.second, opset, c});
  return out;
}

std::string unsupported_message(const std::string &what, const std::vector<UnsupportedOp> &ops) {
  std::ostringstream os;
  os << what << ": " << ops.size() << " op type" << (ops.size() == 1 ? " is" : "s are") << " not supported:";
  for (const auto &u : ops) {
    os << "\n  " << (u.domain.empty() ? "" : u.domain + ".") << u.op_type << " (opset " << u.opset << ", " << u.nodes
       << " node" << (u.nodes == 1 ? "" : "s") << ")";
  }
  return os.str();
}

std::string dim_text(const ::onnx::TensorShapeProto_Dimension &d) {
  if (d.has_dim_value()) return std::to_string(d.dim_value());
  if (d.has_dim_param() && !d.dim_param().empty()) return d.dim_param();
  return "?";
}

// The static type of a graph input: declared dims, or the caller's shape.
TensorType input_type(const ::onnx::ValueInfoProto &vi, const ImportOptions &options, const std::string &what) {
  const std::string &name = vi.name();
  if (!vi.type().has_tensor_type())
    throw ImportError(concat(what, ": input '", name, "' is not a tensor (sequences and maps are not supported)"));
  const auto &tt = vi.type().tensor_type();
  const std::string dt = dtype_of_onnx(tt.elem_type());
  if (dt.empty())
    throw ImportError(concat(what, ": input '", name, "' has an unsupported element type ", tt.elem_type()));
  TensorType t;
  t.dtype = *graph::dtype_from_name(dt);
  auto given = options.input_shapes.find(name);
  if (!tt.has_shape()) {
    if (given == options.input_shapes.end())
      throw ImportError(
          concat(what, ": input '", name, "' has no declared shape: give it (--input-shape ", name, "=...)"));
    t.shape = given->second;
    return t;
  }
  const auto &dims = tt.shape().dim();
  if (given != options.input_shapes.end()) {
    if (given->second.size() != static_cast<size_t>(dims.size()))
      throw ImportError(concat(what, ": input '", name, "' has rank ", dims.size(), ", the shape given has rank ",
                               given->second.size()));
    for (int k = 0; k < dims.size(); ++k) {
      if (dims[k].has_dim_value() && dims[k].dim_value() != given->second[static_cast<size_t>(k)])
        throw ImportError(concat(what, ": input '", name, "' dimension ", k, " is ", dims[k].dim_value(),
                                 " in the model, ", given->second[static_cast<size_t>(k)], " in the shape given"));
      if (given->second[static_cast<size_t>(k)] < 0)
        throw ImportError(concat(what, ": input '", name, "': a negative dimension in the shape given"));
    }
    t.shape = given->second;
    return t;
  }
  for (int k = 0; k < dims.size(); ++k) {
    if (!dims[k].has_dim_value() || dims[k].dim_value() < 0) {
      std::string shown;
      for (int j = 0; j < dims.size(); ++j) shown += (j ? "x" : "") + dim_text(dims[j]);
      throw ImportError(
          concat(what, ": input '", name, "' dimension ", k, " ('", dim_text(dims[k]), "') is not fixed (shape ", shown,
                 "): give the input's shape, e.g. --input-shape ", name, "=", [&] {
                   std::string s;
                   for (int j = 0; j < dims.size(); ++j)
                     s += (j ? "x" : "") + (dims[j].has_dim_value() ? std::to_string(dims[j].dim_value()) : "1");
                   return s;
                 }()));
    }
    t.shape.push_back(dims[k].dim_value());
  }
  return t;
}

void check_output(const graph::Graph &g, const ::onnx::ValueInfoProto &vi, ValueId v, const std::string &what) {
  if (!vi.type().has_tensor_type()) return;
  const auto &tt = vi.type().tensor_type();
  const TensorType &got = g.value(v).type;
  const std::string dt = dtype_of_onnx(tt.elem_type());
  if (tt.elem_type() != 0 && !dt.empty() && *graph::dtype_from_name(dt) != got.dtype)
    throw ImportError(concat(what, ": output '", vi.name(), "' is declared ", dt, " but computes ", got.str()));
  if (!tt.has_shape() || tt.shape().dim_size() == 0) return;
  if (tt.shape().dim_size() != got.rank())
    throw ImportError(concat(what, ": output '", vi.name(), "' is declared with rank ", tt.shape().dim_size(),
                             " but computes ", got.str()));
}

graph::Graph build(const ::onnx::ModelProto &m, const ImportOptions &options, const std::string &base_dir,
                   const std::string &what) {
  const int64_t opset = model_opset(m, what);
  if (opset > kMaxOpset)
    throw ImportError(concat(what, ": opset ", opset, " is newer than Kiln supports (", kMinOpset, " to ", kMaxOpset,
                             "); export the model with opset ", kMaxOpset, " or lower"));
  if (opset < kMinOpset) throw ImportError(concat(what, ": opset ", opset, " is not a valid opset"));
  const ::onnx::GraphProto &gp = m.graph();
  auto unsupported = find_unsupported(gp, opset);
  if (!unsupported.empty()) throw UnsupportedOpsError(unsupported_message(what, unsupported), unsupported);

  graph::Graph g;
  g.name = gp.name();
  ConvertContext cx(g, options, opset);
  // Initializers first (in old models they are listed among the inputs too).
  std::set<std::string> init_names;
  int64_t constant_bytes = 0;
  for (const auto &t : gp.initializer()) {
    if (t.name().empty()) throw ImportError(concat(what, ": an initializer has no name"));
    if (init_names.count(t.name())) throw ImportError(concat(what, ": initializer '", t.name(), "' is defined twice"));
    deploy::Tensor data = tensor_from_proto(t, base_dir, concat(what, ": initializer '", t.name(), "'"));
    constant_bytes += static_cast<int64_t>(data.nbytes());
    if (constant_bytes > options.max_constant_bytes)
      throw ImportError(concat(what, ": the initializers take more than ", options.max_constant_bytes, " bytes"));
    init_names.insert(t.name());
    g.add_constant(t.name(), data);
  }
  for (const auto &vi : gp.input()) {
    if (init_names.count(vi.name())) continue;
    if (g.find(vi.name()) != graph::kNoValue)
      throw ImportError(concat(what, ": input '", vi.name(), "' is defined twice"));
    auto frozen = options.frozen_inputs.find(vi.name());
    if (frozen != options.frozen_inputs.end()) {
      const deploy::Tensor &t = frozen->second;
      ImportOptions with_shape = options;
      with_shape.input_shapes[vi.name()] = t.shape();
      TensorType want = input_type(vi, with_shape, what);
      TensorType got{ir::to_ir_type(t.dtype()), t.shape()};
      if (got != want)
        throw ImportError(
            concat(what, ": input '", vi.name(), "' is ", want.str(), ", the value it is frozen to is ", got.str()));
      g.add_constant(vi.name(), t);
      continue;
    }
    const TensorType type = input_type(vi, options, what);
    if (!type.size_fits()) throw ImportError(concat(what, ": input '", vi.name(), "' is too large: ", type.str()));
    g.add_input(vi.name(), type);
  }
  for (const auto &[name, t] : options.frozen_inputs) {
    bool found = false;
    for (const auto &vi : gp.input()) found = found || (vi.name() == name && !init_names.count(name));
    if (!found)
      throw ImportError(concat(what, ": the model has no input named '", name, "' (a value was given for it)"));
  }
  for (const auto &[name, shape] : options.input_shapes) {
    bool found = false;
    for (const auto &vi : gp.input()) found = found || (vi.name() == name && !init_names.count(name));
    if (!found)
      throw ImportError(concat(what, ": the model has no input named '", name, "' (a shape was given for it)"));
  }
  for (const auto &n : gp.node()) {
    const Converter *c = find_converter(n.op_type(), opset);
    try {
      (*c)(cx, n);
    } catch (const UserError &e) {
      // Converter and graph errors get the file's name; those that do not name the node get its name.
      std::string msg = e.what();
      if (msg.rfind("node '", 0) != 0) msg = concat("node '", cx.node_name(n), "' (", n.op_type(), "): ", msg);
      throw ImportError(concat(what, ": ", msg));
    }
  }
  for (const auto &vi : gp.output()) {
    ValueId v = g.find(vi.name());
    if (v == graph::kNoValue) throw ImportError(concat(what, ": output '", vi.name(), "' is never computed"));
    check_output(g, vi, v, what);
    g.add_output(v);
  }
  graph::Graph pruned = g.prune();
  try {
    graph::verify(pruned);
  } catch (const UserError &e) {
    throw ImportError(concat(what, ": ", e.what()));
  }
  return pruned;
}

std::string bytes_of_file_for(const std::string &path) { return read_file(path, kMaxModelFile); }

}  // namespace

std::string dtype_of_onnx(int32_t t) {
  switch (t) {
    case ::onnx::TensorProto::FLOAT:
      return "float32";
    case ::onnx::TensorProto::UINT8:
      return "uint8";
    case ::onnx::TensorProto::INT8:
      return "int8";
    case ::onnx::TensorProto::UINT16:
      return "uint16";
    case ::onnx::TensorProto::INT16:
      return "int16";
    case ::onnx::TensorProto::INT32:
      return "int32";
    case ::onnx::TensorProto::INT64:
      return "int64";
    case ::onnx::TensorProto::BOOL:
      return "bool";
    case ::onnx::TensorProto::FLOAT16:
      return "float16";
    case ::onnx::TensorProto::DOUBLE:
      return "float64";
    case ::onnx::TensorProto::UINT32:
      return "uint32";
    case ::onnx::TensorProto::UINT64:
      return "uint64";
    default:
      return "";
  }
}

namespace {

// Reads `length` bytes at `offset` of an external data file inside base_dir.
std::string read_external(const ::onnx::TensorProto &t, const std::string &base_dir, const std::string &what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    try {
      if (e.key() == "offset") offset = std::stoll(e.value());
      if (e.key() == "length") length = std::stoll(e.value());
    } catch (const std::exception &) {
      throw ImportError(concat(what, ": external data ", e.key(), " '", e.value(), "' is not a number"));
    }
  }
  if (base_dir.empty()) throw ImportError(concat(what, ": external data, but the model was not read from a file"));
  if (location.empty()) throw ImportError(concat(what, ": external data without a location"));
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    throw ImportError(
        concat(what, ": external data location '", location, "' must be a path inside the model's folder"));
  if (offset < 0) throw ImportError(concat(what, ": a negative external data offset"));
  const std::string path = (std::filesystem::path(base_dir) / rel).string();
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ImportError(concat(what, ": cannot open its external data file '", location, "'"));
  f.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(f.tellg());
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset)
    throw ImportError(concat(what, ": external data '", location, "' has ", size, " bytes, the tensor needs ", length,
                             " at offset ", offset));
  std::string data(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(data.data(), length);
  if (!f) throw ImportError(concat(what, ": read of '", location, "' failed"));
  return data;
}

template <class Dst, class Src>
void copy_field(deploy::Tensor &out, const Src &field, int64_t n) {
  auto *d = static_cast<Dst *>(out.data());
  for (int64_t k = 0; k < n; ++k) d[k] = static_cast<Dst>(field.Get(static_cast<int>(k)));
}

}  // namespace

deploy::Tensor tensor_from_proto(const ::onnx::TensorProto &t, const std::string &base_dir, const std::string &what) {
  const std::string dt = dtype_of_onnx(t.data_type());
  if (dt.empty()) throw ImportError(concat(what, ": element type ", t.data_type(), " is not supported"));
  const ir::DataType type = *graph::dtype_from_name(dt);
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  const int64_t elem = type.bytes();
  for (int64_t d : shape) {
    if (d < 0) throw ImportError(concat(what, ": a negative dimension"));
    if (d > 0 && n > std::numeric_limits<int64_t>::max() / d / elem)
      throw ImportError(concat(what, ": its declared shape overflows"));
    n *= d;
  }
  const int64_t bytes = n * elem;
  std::string external;
  const std::string *raw = nullptr;
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
    external = read_external(t, base_dir, what);
    raw = &external;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (static_cast<int64_t>(raw->size()) != bytes)
      throw ImportError(concat(what, ": declared as ", graph::TensorType{type, shape}.str(), " (", bytes,
                               " bytes) but holds ", raw->size(), " bytes"));
    deploy::Tensor out = deploy::Tensor::empty(shape, ir::to_deploy_dtype(type));
    if (bytes) std::memcpy(out.data(), raw->data(), static_cast<size_t>(bytes));
    return out;
  }
  // Typed fields.
  int64_t have = 0;
  switch (t.data_type()) {
    case ::onnx::TensorProto::FLOAT:
      have = t.float_data_size();
      break;
    case ::onnx::TensorProto::DOUBLE:
      have = t.double_data_size();
      break;
    case ::onnx::TensorProto::INT64:
      have = t.int64_data_size();
      break;
    case ::onnx::TensorProto::UINT32:
    case ::onnx::TensorProto::UINT64:
      have = t.uint64_data_size();
      break;
    default:
      have = t.int32_data_size();
      break;
  }
  if (have != n)
    throw ImportError(
        concat(what, ": declared as ", graph::TensorType{type, shape}.str(), " (", n, " elements) but holds ", have));
  deploy::Tensor out = deploy::Tensor::empty(shape, ir::to_deploy_dtype(type));
  switch (t.data_type()) {
    case ::onnx::TensorProto::FLOAT:
      copy_field<float>(out, t.float_data(), n);
      break;
    case ::onnx::TensorProto::DOUBLE:
      copy_field<double>(out, t.double_data(), n);
      break;
    case ::onnx::TensorProto::INT64:
      copy_field<int64_t>(out, t.int64_data(), n);
      break;
    case ::onnx::TensorProto::UINT32:
      copy_field<uint32_t>(out, t.uint64_data(), n);
      break;
    case ::onnx::TensorProto::UINT64:
      copy_field<uint64_t>(out, t.uint64_data(), n);
      break;
    case ::onnx::TensorProto::INT32:
      copy_field<int32_t>(out, t.int32_data(), n);
      break;
    case ::onnx::TensorProto::INT16:
      copy_field<int16_t>(out, t.int32_data(), n);
      break;
    case ::onnx::TensorProto::UINT16:
    case ::onnx::TensorProto::FLOAT16:
      copy_field<uint16_t>(out, t.int32_data(), n);
      break;
    case ::onnx::TensorProto::INT8:
      copy_field<int8_t>(out, t.int32_data(), n);
      break;
    case ::onnx::TensorProto::UINT8:
    case ::onnx::TensorProto::BOOL:
      copy_field<uint8_t>(out, t.int32_data(), n);
      break;
    default:
      throw ImportError(concat(what, ": element type ", t.data_type(), " is not supported"));
  }
  return out;
}

deploy::Tensor parse_tensor(std::string_view bytes, const std::string &what) {
  ::onnx::TensorProto t;
  parse_message(t, bytes, what, "ONNX TensorProto");
  return tensor_from_proto(t, "", what);
}

deploy::Tensor read_tensor_file(const std::string &path) { return parse_tensor(read_file(path, kMaxModelFile), path); }

graph::Graph import_model_bytes(std::string_view bytes, const ImportOptions &options, const std::string &base_dir,
                                const std::string &what) {
  if (bytes.empty()) throw ImportError(concat(what, ": the file is empty, not an ONNX model"));
  ::onnx::ModelProto m;
  parse_message(m, bytes, what, "ONNX model");
  if (!m.has_graph()) throw ImportError(concat(what, ": the model has no graph"));
  return build(m, options, base_dir, what);
}

graph::Graph import_model(const std::string &path, const ImportOptions &options) {
  const std::string bytes = bytes_of_file_for(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return import_model_bytes(bytes, options, dir, path);
}

ModelInfo inspect_model(const std::string &path) {
  const std::string bytes = bytes_of_file_for(path);
  ::onnx::ModelProto m;
  parse_message(m, bytes, path, "ONNX model");
  ModelInfo info;
  info.ir_version = m.ir_version();
  info.opset = model_opset(m, path);
  info.producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  const auto &gp = m.graph();
  std::set<std::string> init;
  for (const auto &t : gp.initializer()) {
    init.insert(t.name());
    ++info.initializers;
    int64_t n = 1;
    for (int64_t d : t.dims()) {
      d = std::max<int64_t>(d, 0);
      if (d > 0 && n > std::numeric_limits<int64_t>::max() / d)
        throw ImportError(concat(path, ": initializer '", t.name(), "': its declared shape overflows"));
      n *= d;
    }
    if (n > std::numeric_limits<int64_t>::max() - info.parameters)
      throw ImportError(concat(path, ": the initializers declare more than 2^63 elements"));
    info.parameters += n;
  }
  auto io = [](const ::onnx::ValueInfoProto &vi) {
    ModelInfo::Io x;
    x.name = vi.name();
    if (vi.type().has_tensor_type()) {
      const auto &tt = vi.type().tensor_type();
      x.dtype = dtype_of_onnx(tt.elem_type());
      if (x.dtype.empty()) x.dtype = concat("type ", tt.elem_type());
      if (tt.has_shape()) {
        for (const auto &d : tt.shape().dim()) x.dims.push_back(dim_text(d));
      }
    } else {
      x.dtype = "non-tensor";
    }
    return x;
  };
  for (const auto &vi : gp.input()) {
    if (!init.count(vi.name())) info.inputs.push_back(io(vi));
  }
  for (const auto &vi : gp.output()) info.outputs.push_back(io(vi));
  for (const auto &n : gp.node()) ++info.op_counts[(domain_of(n).empty() ? "" : domain_of(n) + ".") + n.op_type()];
  if (info.opset >= kMinOpset && info.opset <= kMaxOpset) info.unsupported = find_unsupported(gp, info.opset);
  return info;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (const auto &[op, v] : converter_table()) out.push_back(op);
  return out;
}

// --- ConvertContext ---

std::string ConvertContext::node_name(const ::onnx::NodeProto &n) const {
  if (!n.name().empty()) return n.name();
  if (n.output_size() > 0 && !n.output(0).empty()) return n.op_type() + ":" + n.output(0);
  return n.op_type();
}

void ConvertContext::fail(const ::onnx::NodeProto &n, const std::string &what) const {
  throw ImportError(concat("node '", node_name(n), "' (", n.op_type(), "): ", what));
}

ValueId ConvertContext::input(const ::onnx::NodeProto &n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) return graph::kNoValue;
  const std::string &name = n.input(i);
  auto a = aliases_.find(name);
  if (a != aliases_.end()) return a->second;
  ValueId v = g_.find(name);
  if (v == graph::kNoValue)
    fail(n, concat("input '", name,
                   "' is not defined before the node (a missing initializer, a cycle, or nodes out of order)"));
  return v;
}

std::vector<ValueId> ConvertContext::inputs(const ::onnx::NodeProto &n) const {
  std::vector<ValueId> v;
  for (int i = 0; i < n.input_size(); ++i) v.push_back(input(n, i));
  while (!v.empty() && v.back() == graph::kNoValue) v.pop_back();
  return v;
}

std::map<std::string, Attribute> ConvertContext::attributes(const ::onnx::NodeProto &n) const {
  std::map<std::string, Attribute> out;
  for (const auto &a : n.attribute()) {
    if (a.name() == "consumed_inputs") continue;  // a legacy attribute of opsets before 6, with no effect
    switch (a.type()) {
      case ::onnx::AttributeProto::INT:
        out[a.name()] = Attribute::of_int(a.i());
        break;
      case ::onnx::AttributeProto::FLOAT:
        out[a.name()] = Attribute::of_float(a.f());
        break;
      case ::onnx::AttributeProto::STRING:
        out[a.name()] = Attribute::of_string(a.s());
        break;
      case ::onnx::AttributeProto::INTS:
        out[a.name()] = Attribute::of_ints(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case ::onnx::AttributeProto::FLOATS:
        out[a.name()] = Attribute::of_floats(std::vector<double>(a.floats().begin(), a.floats().end()));
        break;
      case ::onnx::AttributeProto::STRINGS:
        out[a.name()] = Attribute::of_strings(std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case ::onnx::AttributeProto::TENSOR:
        out[a.name()] = Attribute::of_tensor(tensor_from_proto(a.t(), "", concat("attribute '", a.name(), "'")));
        break;
      default:
        fail(n, concat("attribute '", a.name(), "' is a graph or another kind Kiln does not support"));
    }
  }
  return out;
}

std::vector<std::string> ConvertContext::outputs(const ::onnx::NodeProto &n) const {
  std::vector<std::string> out(n.output().begin(), n.output().end());
  while (!out.empty() && out.back().empty()) out.pop_back();
  for (auto &o : out) {
    if (o.empty()) o = g_.unique_name(concat(node_name(n), "_unused"));
  }
  return out;
}

ValueId ConvertContext::constant_ints(const std::string &base, const std::vector<int64_t> &values, bool scalar) {
  std::vector<int64_t> shape;
  if (!scalar) shape.push_back(static_cast<int64_t>(values.size()));
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<int64_t>());
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return g_.add_constant(g_.unique_name(base), t);
}

ValueId ConvertContext::constant_floats(const std::string &base, const std::vector<double> &values, ir::DataType dtype,
                                        bool scalar) {
  std::vector<int64_t> shape;
  if (!scalar) shape.push_back(static_cast<int64_t>(values.size()));
  deploy::Tensor t = deploy::Tensor::empty(shape, ir::to_deploy_dtype(dtype));
  for (size_t k = 0; k < values.size(); ++k) {
    if (dtype == ir::Float(32))
      t.data_as<float>()[k] = static_cast<float>(values[k]);
    else if (dtype == ir::Float(64))
      t.data_as<double>()[k] = values[k];
    else if (dtype == ir::Float(16))
      static_cast<uint16_t *>(t.data())[k] = ir::float_to_half(static_cast<float>(values[k]));
    else
      KILN_CHECK(false, "constant_floats of ", graph::dtype_name(dtype));
  }
  return g_.add_constant(g_.unique_name(base), t);
}

void ConvertContext::alias(const std::string &name, ValueId v) { aliases_[name] = v; }

std::vector<ValueId> ConvertContext::emit(const std::string &op, const std::vector<ValueId> &ins,
                                          std::map<std::string, Attribute> attrs,
                                          const std::vector<std::string> &output_names, const std::string &node_name) {
  graph::Node node;
  node.op = op;
  node.name = g_.unique_name(node_name.empty() ? op : node_name);
  node.inputs = ins;
  node.attrs = std::move(attrs);
  node.outputs.assign(output_names.size(), graph::kNoValue);
  std::vector<TensorType> types = graph::infer_types(g_, node);
  bool all_constant = options_.fold_constants;
  for (ValueId i : ins) {
    if (i != graph::kNoValue && !g_.value(i).is_constant()) all_constant = false;
  }
  const graph::OpDef *def = graph::find_op(op);
  if (def->evaluate) {
    // Outputs that follow from types alone (Shape, Size) fold even when the inputs are not constant.
    bool ready = true;
    for (int c : def->const_inputs) {
      if (c < static_cast<int>(ins.size()) && ins[static_cast<size_t>(c)] != graph::kNoValue &&
          !g_.value(ins[static_cast<size_t>(c)]).is_constant())
        ready = false;
    }
    all_constant = ready;
  }
  if (all_constant) {
    // Folded outputs are constants: they fall under the same limit as the initializers, checked
    // before anything is allocated.
    for (const TensorType &t : types) {
      if (t.nbytes() > options_.max_constant_bytes)
        throw ImportError(concat("node '", node.name, "' (", op, "): its constant output ", t.str(), " takes ",
                                 t.nbytes(), " bytes, more than the ", options_.max_constant_bytes,
                                 " allowed for constants"));
    }
    // Evaluate in a graph of its own and add the results as constants.
    graph::Graph tmp;
    graph::Node n2 = node;
    for (auto &i : n2.inputs) {
      if (i == graph::kNoValue) continue;
      const graph::Value &v = g_.value(i);
      i = v.is_constant() ? tmp.add_constant(v.name, v.constant) : tmp.add_input(v.name, v.type);
    }
    tmp.add_node(n2, output_names, types);
    driver::ExecutorOptions eo;
    eo.target = options_.target;
    std::vector<deploy::Tensor> vals;
    try {
      vals = driver::evaluate_node(tmp, tmp.nodes()[0], eo);
    } catch (const std::bad_alloc &) {
      throw ImportError(concat("node '", node.name, "' (", op, "): out of memory while folding its constant outputs"));
    }
    std::vector<ValueId> out;
    for (size_t k = 0; k < vals.size(); ++k) out.push_back(g_.add_constant(output_names[k], vals[k]));
    return out;
  }
  return g_.add_node(std::move(node), output_names, types);
}

std::vector<ValueId> ConvertContext::emit_as(const ::onnx::NodeProto &n, const std::string &op,
                                             std::vector<ValueId> ins, std::map<std::string, Attribute> attrs) {
  return emit(op, ins, std::move(attrs), outputs(n), node_name(n));
}

}  // namespace kiln::frontend::onnx
