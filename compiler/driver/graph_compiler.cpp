#include "compiler/driver/graph_compiler.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/memory_plan.h"
#include "compiler/driver/node_kernel.h"
#include "compiler/ir/deploy_dtype.h"
#include "contracts/json.h"
#include "contracts/sha256.h"
#include "deploy/artifact_format.h"

namespace kiln::driver {

using contracts::Json;
using graph::GraphError;
using graph::Node;
using graph::OpDef;
using graph::ValueId;
using ::kiln::detail::concat;

namespace {

// Ops whose generic kernel computes output element i from input elements at index i alone (or
// from broadcast inputs), so that the output may take over an input of its own type.
const std::set<std::string> &elementwise_ops() {
  static const std::set<std::string> ops = {
      "Relu", "LeakyRelu", "Sigmoid",  "Tanh",       "Exp",   "Log",  "Sqrt",    "Erf",         "Neg",
      "Abs",  "Clip",      "Add",      "Sub",        "Mul",   "Div",  "Pow",     "HardSigmoid", "HardSwish",
      "Elu",  "Selu",      "Softplus", "Reciprocal", "Floor", "Ceil", "Identity"};
  return ops;
}

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A directory for the library while it is linked, removed with its files.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln_compile_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw UserError("cannot create a temporary directory to link the model's library");
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

enum class Storage { kNone, kInput, kArena, kParams, kView };

struct ValueInfo {
  Storage storage = Storage::kNone;
  ValueId base = graph::kNoValue;  // kView: the value whose bytes it shares (not itself a view)
  int64_t view_offset = 0;         // kView: where its bytes start in its base's
  int first = 0, last = -1;        // kArena / kInput: steps that write / last read it
  bool output = false;
  int request = -1;    // its index in the memory plan's requests
  int64_t offset = 0;  // in the arena or the parameters
};

void put(std::string &s, const void *p, size_t n) { s.append(static_cast<const char *>(p), n); }

void pad_to(std::string &s, uint64_t alignment) {
  s.resize(static_cast<size_t>(align_up(static_cast<int64_t>(s.size()), static_cast<int64_t>(alignment))), '\0');
}

// A value written straight into its run of a concatenation's bytes.
struct ConcatSlice {
  ValueId whole = graph::kNoValue;  // the Concat's output
  int64_t offset = 0;               // in bytes
};

// The Concats that need no kernel: each input is a contiguous run of the output's bytes (every
// dimension before the axis is 1: a channel concat at batch 1, NCHW or NCHWc) starting at an
// aligned offset, and every input is written by a kernel of this graph that can write into its run
// instead of a buffer of its own. An input must not be a graph input, a constant, a graph output, a
// view, another such Concat's output, an input twice of this Concat or an input of an earlier such
// Concat; otherwise the whole Concat keeps its copy. Per value: its slice, if any; per node:
// whether it is such a Concat.
std::vector<ConcatSlice> concat_slices(const graph::Graph &g, std::vector<bool> &in_place_concat) {
  std::vector<ConcatSlice> slices(g.values().size());
  in_place_concat.assign(g.nodes().size(), false);
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    if (n.op != "Concat" || n.outputs.size() != 1 || n.inputs.empty()) continue;
    const graph::TensorType &out = g.value(n.outputs[0]).type;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += out.rank();
    if (axis < 0 || axis >= out.rank()) continue;
    bool ok = true;
    for (int64_t a = 0; a < axis; ++a) ok = ok && out.shape[static_cast<size_t>(a)] == 1;
    std::vector<ConcatSlice> mine;
    std::set<ValueId> seen;
    int64_t offset = 0;
    for (ValueId in : n.inputs) {
      if (!ok) break;
      if (in == graph::kNoValue) {
        ok = false;
        break;
      }
      const graph::Value &v = g.value(in);
      ok = !v.is_constant() && v.producer >= 0 && !outputs.count(in) && seen.insert(in).second &&
           slices[static_cast<size_t>(in)].whole == graph::kNoValue && offset % kBufferAlignment == 0;
      if (!ok) break;
      const Node &p = g.node(v.producer);
      const OpDef *def = graph::find_op(p.op);
      ok = def && !def->view && !def->evaluate && !in_place_concat[static_cast<size_t>(v.producer)];
      mine.push_back({n.outputs[0], offset});
      offset += v.type.nbytes();
    }
    if (!ok) continue;
    in_place_concat[k] = true;
    for (size_t i = 0; i < n.inputs.size(); ++i) slices[static_cast<size_t>(n.inputs[i])] = mine[i];
  }
  return slices;
}

}  // namespace

GraphCompileReport compile_graph(const graph::Graph &g, const std::string &path, const GraphCompileOptions &options) {
  const auto t0 = std::chrono::steady_clock::now();
  graph::verify(g);
  GraphCompileReport report;
  report.nodes = static_cast<int>(g.nodes().size());
  const auto &nodes = g.nodes();
  const int end = static_cast<int>(nodes.size());  // a step index after every node

  // Where each value lives.
  std::vector<ValueInfo> vi(g.values().size());
  auto info = [&](ValueId id) -> ValueInfo & { return vi[static_cast<size_t>(id)]; };
  for (size_t v = 0; v < g.values().size(); ++v) {
    if (g.values()[v].is_constant()) vi[v].storage = Storage::kParams;
  }
  for (ValueId id : g.inputs()) {
    info(id).storage = Storage::kInput;
    info(id).first = 0;
    info(id).last = end;
  }
  // Kernels: one per distinct signature, lowered once.
  std::map<std::string, std::string> kernel_names;  // signature -> function
  std::vector<ir::LoweredFunc> funcs;
  struct Step {
    const Node *node = nullptr;
    int index = 0;
    std::string function;  // empty: a view
    std::vector<ValueId> args;
    const OpDef *def = nullptr;
    bool from_template = false;
    bool concat = false;  // a Concat whose inputs were written into its output (args: it, its inputs)
  };
  std::vector<Step> steps;
  std::vector<bool> in_place_concat(nodes.size(), false);
  std::vector<ConcatSlice> slices(vi.size());
  if (options.concat_in_place) slices = concat_slices(g, in_place_concat);
  for (int k = 0; k < end; ++k) {
    const Node &n = nodes[static_cast<size_t>(k)];
    const OpDef *def = graph::find_op(n.op);
    if (def->evaluate)
      throw GraphError(concat(n.describe(), ": op ", n.op,
                              " is evaluated only at compile time and its inputs are not constants here; it cannot be "
                              "compiled into an artifact"));
    Step st;
    st.node = &n;
    st.index = k;
    st.def = def;
    if (def->view) {
      const ValueId src = n.inputs[0];
      const ValueInfo &s = info(src);
      info(n.outputs[0]).storage = Storage::kView;
      info(n.outputs[0]).base = s.storage == Storage::kView ? s.base : src;
      info(n.outputs[0]).view_offset = s.storage == Storage::kView ? s.view_offset : 0;
      st.args = {n.outputs[0], src};
      steps.push_back(st);
      continue;
    }
    for (ValueId o : n.outputs) {
      const ConcatSlice &slice = slices[static_cast<size_t>(o)];
      if (slice.whole != graph::kNoValue) {  // written into its run of a Concat's output
        info(o).storage = Storage::kView;
        info(o).base = slice.whole;
        info(o).view_offset = slice.offset;
        continue;
      }
      info(o).storage = Storage::kArena;
      info(o).first = k;
      info(o).last = k;
    }
    if (in_place_concat[static_cast<size_t>(k)]) {
      // No kernel: the inputs' producers wrote its bytes, so it lives from the first of them.
      for (ValueId in : n.inputs) info(n.outputs[0]).first = std::min(info(n.outputs[0]).first, g.value(in).producer);
      st.args = {n.outputs[0]};
      st.args.insert(st.args.end(), n.inputs.begin(), n.inputs.end());
      st.concat = true;
      steps.push_back(st);
      ++report.concats_in_place;
      continue;
    }
    if (!needs_kernel(g, n, *def)) continue;  // an empty output: nothing to compute
    NodeKernel nk = prepare_node_kernel(g, n, *def, options.kernels);
    auto it = kernel_names.find(nk.signature);
    if (it == kernel_names.end()) {
      const std::string name = concat("kiln_k", kernel_names.size());
      funcs.push_back(lower_node_kernel(g, n, nk, name));
      it = kernel_names.emplace(nk.signature, name).first;
      ++report.kernels;
      if (nk.tuned_as_task) {
        ++report.template_kernels;
        if (nk.report.source == KernelReport::Source::kExact || nk.report.source == KernelReport::Source::kDeviceClass)
          ++report.tuned_kernels;
        report.templates.push_back(nk.report);
      }
    }
    st.function = it->second;
    st.from_template = nk.from_template();
    for (int i : nk.kernel.input_map) st.args.push_back(n.inputs[static_cast<size_t>(i)]);
    st.args.insert(st.args.end(), n.outputs.begin(), n.outputs.end());
    steps.push_back(st);
    ++report.steps;
  }
  // Lifetimes: a read extends the value's (or, for a view, its base's) lifetime; outputs live to
  // the end.
  auto owner = [&](ValueId id) { return info(id).storage == Storage::kView ? info(id).base : id; };
  for (const Step &st : steps) {
    if (st.function.empty()) continue;
    const size_t num_outputs = st.node->outputs.size();
    for (size_t a = 0; a + num_outputs < st.args.size(); ++a) {
      ValueInfo &b = info(owner(st.args[a]));
      b.last = std::max(b.last, st.index);
    }
  }
  for (ValueId o : g.outputs()) {
    info(o).output = true;
    info(owner(o)).last = end;
  }
  // The memory plan over the arena's tensors (inputs, kernel outputs).
  std::vector<BufferRequest> requests;
  std::vector<ValueId> request_value;
  for (size_t v = 0; v < vi.size(); ++v) {
    if (vi[v].storage != Storage::kArena && vi[v].storage != Storage::kInput) continue;
    vi[v].request = static_cast<int>(requests.size());
    BufferRequest r;
    r.bytes = g.values()[v].type.nbytes();
    r.first = vi[v].first;
    r.last = vi[v].last;
    requests.push_back(r);
    request_value.push_back(static_cast<ValueId>(v));
  }
  if (options.in_place) {
    for (const Step &st : steps) {
      if (st.function.empty() || st.from_template || st.node->outputs.size() != 1 ||
          !elementwise_ops().count(st.node->op))
        continue;
      const ValueId out = st.node->outputs[0];
      if (info(out).output || info(out).request < 0) continue;
      for (size_t a = 0; a + 1 < st.args.size(); ++a) {
        const ValueId in = st.args[a];
        const ValueInfo &iv = info(in);
        if (iv.storage != Storage::kArena || iv.output || iv.last != st.index) continue;
        if (g.value(in).type != g.value(out).type) continue;
        requests[static_cast<size_t>(info(out).request)].in_place_of = iv.request;
        break;
      }
    }
  }
  const MemoryPlan plan = plan_memory(requests);
  const std::string conflict = find_plan_conflict(requests, plan);
  if (!conflict.empty()) throw InternalError(concat("memory plan: ", conflict));
  for (size_t r = 0; r < requests.size(); ++r) info(request_value[r]).offset = plan.offsets[r];
  report.arena_bytes = plan.arena_bytes;
  report.unplanned_bytes = plan.unplanned_bytes;
  report.in_place = plan.in_place;

  // Parameters: every constant a step reads or the graph outputs, 64-byte aligned.
  std::string params;
  std::vector<bool> used(vi.size(), false);
  for (const Step &st : steps) {
    for (ValueId a : st.args) used[static_cast<size_t>(owner(a))] = true;
  }
  for (ValueId o : g.outputs()) used[static_cast<size_t>(owner(o))] = true;
  for (size_t v = 0; v < vi.size(); ++v) {
    if (vi[v].storage != Storage::kParams || !used[v]) continue;
    pad_to(params, deploy::kArtifactAlignment);
    vi[v].offset = static_cast<int64_t>(params.size());
    const deploy::Tensor &c = g.values()[v].constant;
    if (!c.is_contiguous()) throw InternalError(concat("constant ", g.values()[v].name, " is not contiguous"));
    put(params, c.data(), c.nbytes());
  }
  report.params_bytes = static_cast<int64_t>(params.size());

  // The graph as JSON.
  Json values = Json::array();
  for (size_t v = 0; v < vi.size(); ++v) {
    const graph::Value &val = g.values()[v];
    const ValueInfo &x = vi[v];
    const ValueInfo &b = x.storage == Storage::kView ? vi[static_cast<size_t>(x.base)] : x;
    const bool placed =
        (b.storage == Storage::kArena || b.storage == Storage::kInput ||
         (b.storage == Storage::kParams && used[x.storage == Storage::kView ? static_cast<size_t>(x.base) : v]));
    Json j = Json::object();
    j.set("id", static_cast<int64_t>(v));
    j.set("name", val.name);
    j.set("dtype", ir::to_deploy_dtype(val.type.dtype).to_string());
    j.set("shape", Json::array_of(val.type.shape));
    j.set("bytes", val.type.nbytes());
    const char *kind = x.storage == Storage::kInput    ? "input"
                       : x.storage == Storage::kArena  ? "intermediate"
                       : x.storage == Storage::kParams ? "constant"
                       : x.storage == Storage::kView   ? "view"
                                                       : "unused";
    j.set("kind", kind);
    if (x.storage == Storage::kView) j.set("view_of", static_cast<int64_t>(x.base));
    if (x.storage == Storage::kView && x.view_offset) j.set("view_offset", x.view_offset);
    if (placed) {
      j.set("region", b.storage == Storage::kParams ? "params" : "arena");
      j.set("offset", b.offset + (x.storage == Storage::kView ? x.view_offset : 0));
    }
    if (x.storage == Storage::kArena || x.storage == Storage::kInput)
      j.set("live", Json::array_of(std::vector<int64_t>{x.first, x.last}));
    values.push_back(std::move(j));
  }
  Json jsteps = Json::array();
  for (const Step &st : steps) {
    Json j = Json::object();
    j.set("node", st.node->name);
    j.set("op", st.node->op);
    j.set("index", st.index);
    if (st.concat) {
      j.set("concat_in_place", static_cast<int64_t>(st.args[0]));
      j.set("of", Json::array_of(std::vector<int64_t>(st.args.begin() + 1, st.args.end())));
    } else if (st.function.empty()) {
      j.set("view", static_cast<int64_t>(st.args[0]));
      j.set("of", static_cast<int64_t>(st.args[1]));
    } else {
      j.set("kernel", st.function);
      std::vector<int64_t> args(st.args.begin(), st.args.end());
      j.set("args", Json::array_of(args));
      j.set("num_outputs", static_cast<int64_t>(st.node->outputs.size()));
    }
    jsteps.push_back(std::move(j));
  }
  Json root = Json::object();
  root.set("format", "kiln-graph");
  root.set("target", options.kernels.target);
  root.set("values", std::move(values));
  root.set("steps", std::move(jsteps));
  root.set("inputs", Json::array_of(std::vector<int64_t>(g.inputs().begin(), g.inputs().end())));
  root.set("outputs", Json::array_of(std::vector<int64_t>(g.outputs().begin(), g.outputs().end())));
  Json jplan = Json::object();
  jplan.set("arena_bytes", plan.arena_bytes);
  jplan.set("unplanned_bytes", plan.unplanned_bytes);
  jplan.set("in_place", plan.in_place);
  jplan.set("concats_in_place", report.concats_in_place);
  jplan.set("alignment", kBufferAlignment);
  root.set("memory_plan", std::move(jplan));
  root.set("params_bytes", report.params_bytes);
  const std::string graph_json = root.dump();

  // The library.
  std::string library;
  {
    ScratchDir scratch;
    const std::string lib_path = scratch.path + "/model.so";
    codegen::LLVMBuildOptions lo;
    lo.target = options.kernels.target;
    codegen::export_library(funcs, lib_path, lo, options.cc);
    library = read_file(lib_path);
    if (library.empty()) throw UserError(concat("the model's library ", lib_path, " came out empty"));
  }

  // The file.
  deploy::ArtifactHeader h;
  std::memcpy(h.magic, deploy::kArtifactMagic, sizeof h.magic);
  std::memset(h.checksum, '0', sizeof h.checksum);
  std::string body(sizeof h, '\0');
  auto section = [&](const std::string &bytes, uint64_t alignment) {
    pad_to(body, alignment);
    deploy::ArtifactSection s{body.size(), bytes.size()};
    body += bytes;
    return s;
  };
  const std::string &target = options.kernels.target;
  h.target = section(target, 8);
  h.library = section(library, deploy::kArtifactAlignment);
  h.graph = section(graph_json, 8);
  h.params = section(params, deploy::kArtifactAlignment);
  h.file_bytes = body.size();
  std::memcpy(body.data(), &h, sizeof h);
  const std::string sum = contracts::sha256_hex(body);
  std::memcpy(body.data() + deploy::kArtifactChecksumOffset, sum.data(), sizeof h.checksum);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(concat("cannot write ", path, ": ", std::strerror(errno)));
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    if (!out) throw UserError(concat("cannot write ", path, ": ", std::strerror(errno)));
  }
  report.file_bytes = static_cast<int64_t>(body.size());
  report.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kiln::driver
