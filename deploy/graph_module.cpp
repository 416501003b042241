#include "deploy/graph_module.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "contracts/json.h"
#include "contracts/sha256.h"
#include "deploy/artifact_format.h"

namespace kiln::deploy {

using contracts::Json;
using ::kiln::detail::concat;

namespace {

std::string shape_text(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

DType parse_dtype(const std::string &s, const std::string &file) {
  DType d;
  size_t p = 0;
  if (s.rfind("float", 0) == 0) {
    d.code = DType::Float;
    p = 5;
  } else if (s.rfind("uint", 0) == 0) {
    d.code = DType::UInt;
    p = 4;
  } else if (s.rfind("int", 0) == 0) {
    d.code = DType::Int;
    p = 3;
  } else {
    throw ArtifactError(concat(file, ": unknown dtype '", s, "' in the graph"));
  }
  const std::string bits = s.substr(p);
  if (bits.empty() || bits.size() > 2 || bits.find_first_not_of("0123456789") != std::string::npos)
    throw ArtifactError(concat(file, ": unknown dtype '", s, "' in the graph"));
  d.bits = static_cast<uint8_t>(std::stoi(bits));
  return d;
}

// The file a model's library is loaded from, held open (and, for a temporary file, on disk) for as
// long as the library is loaded: dlopen() matches libraries by name, so a second model whose file
// got the same name (a reused descriptor number in /proc/self/fd) would be handed the first one's
// library.
struct LibraryFile {
  int fd = -1;
  std::string tmp;  // the temporary file's path, where memfd_create is unavailable
  LibraryFile() = default;
  LibraryFile(const LibraryFile &) = delete;
  LibraryFile &operator=(const LibraryFile &) = delete;
  ~LibraryFile() {
    if (fd >= 0) ::close(fd);
    if (!tmp.empty()) ::unlink(tmp.c_str());
  }
};

// The library's bytes as a file that dlopen() can read: an anonymous memory file, or a private
// temporary file where memfd_create is unavailable.
Module load_library(const std::string &bytes, const std::string &file) {
  auto f = std::make_shared<LibraryFile>();
  f->fd = memfd_create("kiln-model", MFD_CLOEXEC);
  if (f->fd < 0) {
    std::string pattern = "/tmp/kiln_model_XXXXXX";
    f->fd = mkstemp(pattern.data());
    if (f->fd < 0) throw ArtifactError(concat(file, ": cannot create a file for its library: ", std::strerror(errno)));
    f->tmp = pattern;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(f->fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) throw ArtifactError(concat(file, ": cannot write its library: ", std::strerror(errno)));
    done += static_cast<size_t>(w);
  }
  const std::string path = f->tmp.empty() ? concat("/proc/self/fd/", f->fd) : f->tmp;
  try {
    return Module::load(path, f);
  } catch (const ModuleError &e) {
    throw ArtifactError(concat(file, ": its library does not load: ", e.what()));
  }
}

struct Value {
  GraphIo io;
  std::vector<int64_t> arg_shape;  // as passed to kernels: rank 0 becomes [1]
  int64_t bytes = 0;
  bool placed = false;
  bool in_params = false;
  int64_t offset = 0;
};

struct Step {
  std::string function;
  KilnPackedFunc func = nullptr;
  std::vector<KilnArg> args;
};

}  // namespace

struct GraphModule::State {
  std::string path;
  std::string target;
  Module module;
  Tensor arena;   // bytes, 64-byte aligned
  Tensor params;  // bytes, 64-byte aligned
  std::vector<Value> values;
  std::vector<Step> steps;
  std::vector<GraphStep> step_info;  // one per step
  std::vector<int> input_ids, output_ids;
  std::vector<GraphIo> inputs, outputs;

  char *address(const Value &v) {
    char *base = static_cast<char *>(v.in_params ? params.data() : arena.data());
    return base + v.offset;
  }
  const char *address(const Value &v) const { return const_cast<State *>(this)->address(v); }
};

bool is_artifact(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kArtifactMagic] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == static_cast<std::streamsize>(sizeof magic) &&
         std::memcmp(magic, kArtifactMagic, sizeof magic) == 0;
}

GraphModule::GraphModule(std::unique_ptr<State> s) : state_(std::move(s)) {}
GraphModule::GraphModule(GraphModule &&) noexcept = default;
GraphModule &GraphModule::operator=(GraphModule &&) noexcept = default;
GraphModule::~GraphModule() = default;

GraphModule GraphModule::load(const std::string &path) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ArtifactError(concat("cannot open ", path, ": ", std::strerror(errno)));
    std::ostringstream os;
    os << in.rdbuf();
    bytes = os.str();
  }
  if (bytes.size() < sizeof kArtifactMagic || std::memcmp(bytes.data(), kArtifactMagic, sizeof kArtifactMagic) != 0)
    throw ArtifactError(concat(path, " is not a Kiln model artifact (no KILNMODL magic at its start)"));
  if (bytes.size() < 16) throw ArtifactError(concat(path, " is truncated: it ends inside its header"));
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  if (version < kArtifactOldestVersion || version > kArtifactVersion)
    throw ArtifactError(concat(path, " is a Kiln artifact of format version ", version,
                               "; this runtime reads versions ", kArtifactOldestVersion, " to ", kArtifactVersion,
                               " (compile the model again with this version of Kiln)"));
  ArtifactHeader h;
  if (bytes.size() < sizeof h) throw ArtifactError(concat(path, " is truncated: it ends inside its header"));
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.header_bytes != sizeof h) throw ArtifactError(concat(path, " is corrupt: its header size is ", h.header_bytes));
  if (h.file_bytes != bytes.size()) {
    if (bytes.size() < h.file_bytes)
      throw ArtifactError(concat(path, " is truncated: ", bytes.size(), " bytes of ", h.file_bytes));
    throw ArtifactError(concat(path, " is corrupt: ", bytes.size(), " bytes, its header says ", h.file_bytes));
  }
  std::string want(h.checksum, sizeof h.checksum);
  std::memset(bytes.data() + kArtifactChecksumOffset, '0', sizeof h.checksum);
  if (contracts::sha256_hex(bytes) != want)
    throw ArtifactError(concat(path, " is corrupt: its checksum does not match its contents"));
  for (const ArtifactSection *s : {&h.target, &h.library, &h.graph, &h.params}) {
    if (s->offset < sizeof h || s->offset > bytes.size() || s->bytes > bytes.size() - s->offset)
      throw ArtifactError(concat(path, " is corrupt: a section lies outside the file"));
  }
  auto section = [&](const ArtifactSection &s) { return std::string(bytes.data() + s.offset, s.bytes); };

  auto st = std::make_unique<State>();
  st->path = path;
  st->target = section(h.target);
  Json g;
  try {
    g = Json::parse(section(h.graph));
    st->module = load_library(section(h.library), path);
    const int64_t arena_bytes = g.at("memory_plan").at("arena_bytes").as_int();
    const int64_t params_bytes = static_cast<int64_t>(h.params.bytes);
    st->arena = Tensor::empty({std::max<int64_t>(arena_bytes, 1)}, DType::of<uint8_t>());
    st->params = Tensor::empty({std::max<int64_t>(params_bytes, 1)}, DType::of<uint8_t>());
    if (params_bytes) std::memcpy(st->params.data(), bytes.data() + h.params.offset, static_cast<size_t>(params_bytes));
    bytes.clear();
    bytes.shrink_to_fit();
    for (const Json &j : g.at("values").as_array()) {
      Value v;
      v.io.name = j.at("name").as_string();
      v.io.dtype = parse_dtype(j.at("dtype").as_string(), path);
      v.io.shape = j.at("shape").as_int_vector();
      v.arg_shape = v.io.shape.empty() ? std::vector<int64_t>{1} : v.io.shape;
      v.bytes = j.at("bytes").as_int();
      if (const Json *region = j.find("region")) {
        v.placed = true;
        v.in_params = region->as_string() == "params";
        v.offset = j.at("offset").as_int();
        const int64_t limit = v.in_params ? params_bytes : arena_bytes;
        if (v.offset < 0 || v.bytes < 0 || v.offset + v.bytes > limit ||
            v.offset % static_cast<int64_t>(kTensorAlignment))
          throw ArtifactError(concat(path, " is corrupt: value '", v.io.name, "' lies outside its region"));
      }
      st->values.push_back(std::move(v));
    }
    auto value = [&](const Json &id) -> Value & {
      const int64_t i = id.as_int();
      if (i < 0 || static_cast<size_t>(i) >= st->values.size() || !st->values[static_cast<size_t>(i)].placed)
        throw ArtifactError(concat(path, " is corrupt: the graph refers to value ", i, ", which has no storage"));
      return st->values[static_cast<size_t>(i)];
    };
    for (const Json &j : g.at("steps").as_array()) {
      if (!j.contains("kernel")) continue;  // a view: its bytes are its base's
      Step s;
      s.function = j.at("kernel").as_string();
      if (!st->module.find(s.function))
        throw ArtifactError(concat(path, " is corrupt: its library has no kernel ", s.function));
      s.func = st->module.get_function(s.function);
      for (const Json &a : j.at("args").as_array()) {
        Value &v = value(a);
        KilnArg arg{};
        arg.data = st->address(v);
        arg.ndim = static_cast<int32_t>(v.arg_shape.size());
        arg.shape = v.arg_shape.data();
        arg.strides = nullptr;
        arg.dtype_code = static_cast<uint8_t>(v.io.dtype.code);
        arg.dtype_bits = v.io.dtype.bits;
        arg.dtype_lanes = v.io.dtype.lanes;
        s.args.push_back(arg);
      }
      st->step_info.push_back({s.function, j.at("node").as_string(), j.at("op").as_string()});
      st->steps.push_back(std::move(s));
    }
    for (const Json &id : g.at("inputs").as_array()) {
      const Value &v = value(id);
      if (v.in_params) throw ArtifactError(concat(path, " is corrupt: input '", v.io.name, "' lies in the parameters"));
      st->input_ids.push_back(static_cast<int>(id.as_int()));
      st->inputs.push_back(v.io);
    }
    for (const Json &id : g.at("outputs").as_array()) {
      const Value &v = value(id);
      st->output_ids.push_back(static_cast<int>(id.as_int()));
      st->outputs.push_back(v.io);
    }
  } catch (const contracts::JsonError &e) {
    throw ArtifactError(concat(path, " is corrupt: its graph is not valid: ", e.what()));
  } catch (const TensorError &e) {
    throw ArtifactError(concat(path, " is corrupt: ", e.what()));
  }
  return GraphModule(std::move(st));
}

const std::vector<GraphIo> &GraphModule::inputs() const { return state_->inputs; }
const std::vector<GraphIo> &GraphModule::outputs() const { return state_->outputs; }
std::string GraphModule::target() const { return state_->target; }
int64_t GraphModule::arena_bytes() const { return state_->arena.numel(); }
int64_t GraphModule::params_bytes() const { return state_->params.numel(); }

int GraphModule::input_index(const std::string &name) const {
  std::string names;
  for (size_t i = 0; i < state_->inputs.size(); ++i) {
    if (state_->inputs[i].name == name) return static_cast<int>(i);
    names += (names.empty() ? "" : ", ") + state_->inputs[i].name;
  }
  throw GraphInputError(concat("the model has no input named '", name, "' (its inputs: ", names, ")"));
}

void GraphModule::set_input(const std::string &name, const Tensor &t) { set_input(input_index(name), t); }

void GraphModule::set_input(int index, const Tensor &t) {
  if (!t.defined()) {
    const std::string name = index >= 0 && static_cast<size_t>(index) < state_->inputs.size()
                                 ? state_->inputs[static_cast<size_t>(index)].name
                                 : std::to_string(index);
    throw GraphInputError(concat("input '", name, "' has no data"));
  }
  if (!t.is_contiguous()) throw GraphInputError(concat("input ", index, " is not contiguous"));
  set_input(index, t.data(), t.shape(), t.dtype());
}

void GraphModule::set_input(int index, const void *data, const std::vector<int64_t> &shape, DType dtype) {
  if (index < 0 || static_cast<size_t>(index) >= state_->inputs.size())
    throw GraphInputError(
        concat("input index ", index, " is out of range: the model has ", state_->inputs.size(), " inputs"));
  const GraphIo &io = state_->inputs[static_cast<size_t>(index)];
  if (dtype != io.dtype || shape != io.shape)
    throw GraphInputError(concat("input '", io.name, "' is ", dtype.to_string(), shape_text(shape),
                                 ", the model expects ", io.dtype.to_string(), shape_text(io.shape)));
  const Value &v = state_->values[static_cast<size_t>(state_->input_ids[static_cast<size_t>(index)])];
  if (v.bytes && !data) throw GraphInputError(concat("input '", io.name, "' has no data"));
  if (v.bytes) std::memcpy(state_->address(v), data, static_cast<size_t>(v.bytes));
}

void GraphModule::run() {
  for (const Step &s : state_->steps) {
    const int32_t rc = s.func(s.args.data(), static_cast<int32_t>(s.args.size()));
    if (rc != 0) throw state_->module.kernel_error(s.function, rc);
  }
}

const std::vector<GraphStep> &GraphModule::steps() const { return state_->step_info; }

std::vector<double> GraphModule::run_profiled() {
  using Clock = std::chrono::steady_clock;
  std::vector<double> seconds(state_->steps.size());
  Clock::time_point t = Clock::now();
  for (size_t k = 0; k < state_->steps.size(); ++k) {
    const Step &s = state_->steps[k];
    const int32_t rc = s.func(s.args.data(), static_cast<int32_t>(s.args.size()));
    const Clock::time_point end = Clock::now();
    if (rc != 0) throw state_->module.kernel_error(s.function, rc);
    seconds[k] = std::chrono::duration<double>(end - t).count();
    t = end;
  }
  return seconds;
}

RunProfile profile_runs(GraphModule &m, int runs) {
  if (runs < 1) throw GraphInputError(concat("a profile needs at least 1 run, got ", runs));
  using Clock = std::chrono::steady_clock;
  RunProfile p;
  p.runs = runs;
  p.warmup = std::min(runs, 5);
  for (int i = 0; i < p.warmup; ++i) m.run();
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<std::vector<double>> profiled;  // [run][step], ms
  std::vector<double> plain, sums;
  for (int i = 0; i < runs; ++i) {
    const Clock::time_point t0 = Clock::now();
    m.run();
    plain.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::vector<double> ms = m.run_profiled();
    double sum = 0;
    for (double &x : ms) {
      x *= 1e3;
      sum += x;
    }
    profiled.push_back(std::move(ms));
    sums.push_back(sum);
  }
  p.run_ms = median(plain);
  p.steps_ms = median(sums);
  const size_t steps = m.steps().size();
  for (size_t k = 0; k < steps; ++k) {
    std::vector<double> t;
    for (const auto &run : profiled) t.push_back(run[k]);
    p.step_ms.push_back(median(t));
  }
  for (size_t i = 0; i < profiled.size(); ++i)
    if (sums[i] == p.steps_ms) p.typical_ms = profiled[i];
  return p;
}

const void *GraphModule::output_data(int i) const {
  if (i < 0 || static_cast<size_t>(i) >= state_->outputs.size())
    throw GraphInputError(
        concat("output index ", i, " is out of range: the model has ", state_->outputs.size(), " outputs"));
  return state_->address(state_->values[static_cast<size_t>(state_->output_ids[static_cast<size_t>(i)])]);
}

Tensor GraphModule::get_output(int i) const {
  const void *data = output_data(i);
  const GraphIo &io = state_->outputs[static_cast<size_t>(i)];
  Tensor t = Tensor::empty(io.shape, io.dtype);
  if (t.nbytes()) std::memcpy(t.data(), data, t.nbytes());
  return t;
}

}  // namespace kiln::deploy
