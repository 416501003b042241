#include "compiler/driver/graph_executor.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/memory_plan.h"
#include "compiler/driver/node_kernel.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/op.h"

namespace kiln::driver {

using graph::GraphError;
using graph::Node;
using graph::OpContext;
using graph::OpDef;
using graph::TensorType;
using ::kiln::detail::concat;

struct GraphExecutor::CompiledKernel {
  std::unique_ptr<codegen::LLVMModule> module;
  std::string function;
  std::vector<int> input_map;
  bool from_template = false;
  bool tuned_as_task = false;  // see NodeKernel
};

// One arena per planned dtype, for one run at a time.
struct GraphExecutor::Arenas {
  std::vector<deploy::Tensor> tensors;
};

struct GraphExecutor::Pool {
  std::mutex mu;
  std::vector<std::unique_ptr<Arenas>> free;
  int made = 0;
};

const char *source_name(KernelReport::Source s) {
  switch (s) {
    case KernelReport::Source::kDefault:
      return "default";
    case KernelReport::Source::kExact:
      return "tuned";
    case KernelReport::Source::kDeviceClass:
      return "tuned (device class)";
    case KernelReport::Source::kStale:
      return "default (stale record)";
  }
  return "?";
}

namespace {

// The process's kernels by signature: nodes with the same signature share one compiled kernel.
struct KernelCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const GraphExecutor::CompiledKernel>> kernels;
  int64_t next = 0;
};

KernelCache &cache() {
  static KernelCache c;
  return c;
}

std::shared_ptr<const GraphExecutor::CompiledKernel> get_kernel(const graph::Graph &g, const Node &n, const OpDef &def,
                                                                const ExecutorOptions &options, bool *compiled,
                                                                KernelReport *report = nullptr) {
  NodeKernel nk = prepare_node_kernel(g, n, def, options);
  // Where this node's config came from (the cached kernel may have been built for another lookup).
  if (report && nk.tuned_as_task) *report = nk.report;
  KernelCache &c = cache();
  std::string fname;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.kernels.find(nk.signature);
    if (it != c.kernels.end()) {
      *compiled = false;
      return it->second;
    }
    fname = concat("kiln_node_", c.next++);
  }
  auto k = std::make_shared<GraphExecutor::CompiledKernel>();
  k->function = fname;
  k->input_map = nk.kernel.input_map;
  k->from_template = nk.from_template();
  k->tuned_as_task = nk.tuned_as_task;
  ir::LoweredFunc f = lower_node_kernel(g, n, nk, fname);
  try {
    codegen::LLVMBuildOptions opt;
    opt.target = options.target;
    k->module = std::make_unique<codegen::LLVMModule>(f, opt);
  } catch (const GraphError &) {
    throw;
  } catch (const UserError &e) {
    throw GraphError(concat(n.describe(), ": ", e.what()));
  }
  *compiled = true;
  std::lock_guard<std::mutex> lock(c.mu);
  return c.kernels.emplace(nk.signature, std::shared_ptr<const GraphExecutor::CompiledKernel>(k)).first->second;
}

// A kernel argument: rank-0 tensors are passed as shape [1].
deploy::Tensor as_arg(const deploy::Tensor &t) {
  if (t.ndim() == 0) return t.view(0, {1});
  return t;
}

bool is_empty(const std::vector<TensorType> &types) {
  for (const auto &t : types) {
    if (t.numel() == 0) return true;
  }
  return false;
}

// Runs one node: `in` holds its input tensors (undefined for absent inputs), `outs` its output
// tensors where they are placed in an arena (the others, undefined, are allocated here).
std::vector<deploy::Tensor> run_node(const graph::Graph &g, const Node &n, const OpDef &def,
                                     const GraphExecutor::CompiledKernel *k, const std::vector<deploy::Tensor> &in,
                                     std::vector<deploy::Tensor> outs = {}) {
  if (def.view) {
    const auto &t = g.value(n.outputs[0]).type;
    const deploy::Tensor &src = in[0];
    return {src.view(0, t.shape)};
  }
  outs.resize(n.outputs.size());
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (outs[o].defined()) continue;
    const auto &t = g.value(n.outputs[o]).type;
    outs[o] = deploy::Tensor::empty(t.shape, ir::to_deploy_dtype(t.dtype));
  }
  if (!k) return outs;  // an empty output: nothing to compute
  std::vector<deploy::Tensor> args;
  for (int i : k->input_map) args.push_back(as_arg(in[static_cast<size_t>(i)]));
  for (const auto &o : outs) args.push_back(as_arg(o));
  try {
    k->module->call(k->function, args);
  } catch (const UserError &e) {
    throw ExecutionError(concat(n.describe(), ": ", e.what()));
  }
  return outs;
}

std::vector<deploy::Tensor> evaluate_op(const graph::Graph &g, const Node &n, const OpDef &def) {
  OpContext ctx(g, n);
  return def.evaluate(ctx);
}

}  // namespace

GraphExecutor::GraphExecutor(graph::Graph g, const ExecutorOptions &options) : graph_(std::move(g)), options_(options) {
  graph::verify(graph_);
  const auto t0 = std::chrono::steady_clock::now();
  stats_.nodes = static_cast<int>(graph_.nodes().size());
  std::map<const CompiledKernel *, bool> distinct;
  for (const Node &n : graph_.nodes()) {
    const OpDef *def = graph::find_op(n.op);
    if (!needs_kernel(graph_, n, *def)) {
      kernels_.push_back(nullptr);
      continue;
    }
    bool compiled = false;
    KernelReport r;
    auto k = get_kernel(graph_, n, *def, options_, &compiled, &r);
    if (!distinct.count(k.get())) {
      distinct[k.get()] = true;
      ++stats_.kernels;
      if (compiled) ++stats_.kernels_compiled;
      if (k->tuned_as_task) {
        ++stats_.template_kernels;
        if (r.source == KernelReport::Source::kExact || r.source == KernelReport::Source::kDeviceClass)
          ++stats_.tuned_kernels;
        stats_.templates.push_back(r);
      }
    }
    kernels_.push_back(std::move(k));
  }
  stats_.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  plan_arenas();
  pool_ = std::make_unique<Pool>();
}

GraphExecutor::~GraphExecutor() = default;

void GraphExecutor::plan_arenas() {
  // Lifetimes in node indices, as the graph compiler plans them: a value lives from the node that
  // writes it to the last node that reads it (or a view of it); graph outputs to the end.
  const auto &nodes = graph_.nodes();
  const int end = static_cast<int>(nodes.size());
  const size_t nv = graph_.values().size();
  std::vector<graph::ValueId> base(nv, graph::kNoValue);  // a view's value whose bytes it shares
  std::vector<bool> planned(nv, false);
  std::vector<int> first(nv, 0), last(nv, 0);
  auto owner = [&](graph::ValueId id) {
    const auto b = base[static_cast<size_t>(id)];
    return b == graph::kNoValue ? id : b;
  };
  for (int k = 0; k < end; ++k) {
    const Node &n = nodes[static_cast<size_t>(k)];
    const OpDef *def = graph::find_op(n.op);
    if (def->view) {
      base[static_cast<size_t>(n.outputs[0])] = owner(n.inputs[0]);
      continue;
    }
    for (graph::ValueId i : n.inputs) {
      if (i == graph::kNoValue) continue;
      const auto o = static_cast<size_t>(owner(i));
      if (planned[o]) last[o] = std::max(last[o], k);
    }
    if (def->evaluate) continue;
    for (graph::ValueId o : n.outputs) {
      const deploy::DType dt = ir::to_deploy_dtype(graph_.value(o).type.dtype);
      // An arena offset (a multiple of kBufferAlignment bytes) must be a whole number of elements.
      if (dt.bytes() == 0 || kBufferAlignment % static_cast<int64_t>(dt.bytes()) != 0) continue;
      planned[static_cast<size_t>(o)] = true;
      first[static_cast<size_t>(o)] = last[static_cast<size_t>(o)] = k;
    }
  }
  for (graph::ValueId o : graph_.outputs()) {
    const auto b = static_cast<size_t>(owner(o));
    if (planned[b]) last[b] = end;
  }
  // One plan per dtype: a tensor is a typed view of its arena.
  placement_.assign(nv, Placement{});
  std::vector<std::vector<BufferRequest>> requests;
  std::vector<std::vector<size_t>> request_value;
  for (size_t v = 0; v < nv; ++v) {
    if (!planned[v]) continue;
    const deploy::DType dt = ir::to_deploy_dtype(graph_.values()[v].type.dtype);
    size_t a = 0;
    while (a < arena_dtypes_.size() && arena_dtypes_[a] != dt) ++a;
    if (a == arena_dtypes_.size()) {
      arena_dtypes_.push_back(dt);
      requests.emplace_back();
      request_value.emplace_back();
    }
    BufferRequest r;
    r.bytes = graph_.values()[v].type.nbytes();
    r.first = first[v];
    r.last = last[v];
    requests[a].push_back(r);
    request_value[a].push_back(v);
  }
  for (size_t a = 0; a < arena_dtypes_.size(); ++a) {
    const MemoryPlan plan = plan_memory(requests[a]);
    const auto elem = static_cast<int64_t>(arena_dtypes_[a].bytes());
    for (size_t r = 0; r < plan.offsets.size(); ++r)
      placement_[request_value[a][r]] = Placement{static_cast<int>(a), plan.offsets[r] / elem};
    arena_elems_.push_back(std::max<int64_t>(plan.arena_bytes / elem, 1));
    stats_.arena_bytes += plan.arena_bytes;
    stats_.unplanned_bytes += plan.unplanned_bytes;
  }
}

std::unique_ptr<GraphExecutor::Arenas> GraphExecutor::take_arenas() const {
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    if (!pool_->free.empty()) {
      std::unique_ptr<Arenas> a = std::move(pool_->free.back());
      pool_->free.pop_back();
      return a;
    }
    ++pool_->made;
  }
  auto a = std::make_unique<Arenas>();
  for (size_t i = 0; i < arena_dtypes_.size(); ++i)
    a->tensors.push_back(deploy::Tensor::empty({arena_elems_[i]}, arena_dtypes_[i]));
  return a;
}

void GraphExecutor::give_back(std::unique_ptr<Arenas> a) const {
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->free.push_back(std::move(a));
}

int GraphExecutor::arenas_made() const {
  std::lock_guard<std::mutex> lock(pool_->mu);
  return pool_->made;
}

std::vector<deploy::Tensor> GraphExecutor::run(const std::map<std::string, deploy::Tensor> &inputs) const {
  std::vector<deploy::Tensor> ordered;
  for (graph::ValueId id : graph_.inputs()) {
    const auto &name = graph_.value(id).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) throw ExecutionError(concat("no value given for the input '", name, "'"));
    ordered.push_back(it->second);
  }
  for (const auto &[name, t] : inputs) {
    bool known = false;
    for (graph::ValueId id : graph_.inputs()) known = known || graph_.value(id).name == name;
    if (!known) throw ExecutionError(concat("the model has no input named '", name, "'"));
  }
  return run(ordered);
}

std::vector<deploy::Tensor> GraphExecutor::run(const std::vector<deploy::Tensor> &inputs) const {
  if (inputs.size() != graph_.inputs().size())
    throw ExecutionError(concat("the model takes ", graph_.inputs().size(), " inputs, got ", inputs.size()));
  std::vector<deploy::Tensor> values(graph_.values().size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value &v = graph_.value(graph_.inputs()[i]);
    const deploy::Tensor &t = inputs[i];
    if (!t.defined()) throw ExecutionError(concat("input '", v.name, "' has no data"));
    TensorType got{ir::to_ir_type(t.dtype()), t.shape()};
    if (got != v.type)
      throw ExecutionError(concat("input '", v.name, "' is ", got.str(), ", the model expects ", v.type.str()));
    if (!t.is_contiguous()) throw ExecutionError(concat("input '", v.name, "' is not contiguous"));
    values[static_cast<size_t>(graph_.inputs()[i])] = t;
  }
  for (size_t v = 0; v < graph_.values().size(); ++v) {
    if (graph_.values()[v].is_constant()) values[v] = graph_.values()[v].constant;
  }
  // The arenas go back to the pool when the run ends, also by an exception (the outputs are copies).
  struct Lease {
    const GraphExecutor *ex;
    std::unique_ptr<Arenas> a;
    ~Lease() { ex->give_back(std::move(a)); }
  } lease{this, take_arenas()};
  const auto &nodes = graph_.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node &n = nodes[k];
    const OpDef *def = graph::find_op(n.op);
    std::vector<deploy::Tensor> outs;
    if (def->evaluate) {
      outs = evaluate_op(graph_, n, *def);
    } else {
      std::vector<deploy::Tensor> in;
      for (graph::ValueId i : n.inputs)
        in.push_back(i == graph::kNoValue ? deploy::Tensor() : values[static_cast<size_t>(i)]);
      if (!def->view) {
        for (graph::ValueId o : n.outputs) {
          const Placement &p = placement_[static_cast<size_t>(o)];
          outs.push_back(
              p.arena < 0 ? deploy::Tensor()
                          : lease.a->tensors[static_cast<size_t>(p.arena)].view(p.offset, graph_.value(o).type.shape));
        }
      }
      outs = run_node(graph_, n, *def, kernels_[k].get(), in, std::move(outs));
    }
    for (size_t o = 0; o < n.outputs.size(); ++o) values[static_cast<size_t>(n.outputs[o])] = outs[o];
  }
  std::vector<deploy::Tensor> result;
  for (graph::ValueId o : graph_.outputs()) {
    deploy::Tensor t = values[static_cast<size_t>(o)];
    // Outputs own their storage: a view of an input or a constant is copied.
    deploy::Tensor copy = deploy::Tensor::empty(t.shape(), t.dtype());
    if (t.nbytes()) std::memcpy(copy.data(), t.data(), t.nbytes());
    result.push_back(copy);
  }
  return result;
}

std::vector<deploy::Tensor> evaluate_node(const graph::Graph &g, const Node &n, const ExecutorOptions &options) {
  const OpDef *def = graph::find_op(n.op);
  if (!def) throw GraphError(concat(n.describe(), ": unknown op type '", n.op, "'"));
  std::vector<TensorType> outs = graph::infer_types(g, n);
  if (def->evaluate) return evaluate_op(g, n, *def);
  std::vector<deploy::Tensor> in;
  for (graph::ValueId i : n.inputs) {
    if (i == graph::kNoValue) {
      in.emplace_back();
      continue;
    }
    const auto &v = g.value(i);
    if (!v.is_constant()) throw GraphError(concat(n.describe(), ": input '", v.name, "' is not a constant"));
    in.push_back(v.constant);
  }
  std::shared_ptr<const GraphExecutor::CompiledKernel> k;
  if (!def->view && !is_empty(outs)) {
    bool compiled = false;
    k = get_kernel(g, n, *def, options, &compiled);
  }
  // run_node needs output types from the graph: the node's outputs are values of g.
  std::vector<deploy::Tensor> r = run_node(g, n, *def, k.get(), in);
  for (auto &t : r) {
    deploy::Tensor copy = deploy::Tensor::empty(t.shape(), t.dtype());
    if (t.nbytes()) std::memcpy(copy.data(), t.data(), t.nbytes());
    t = copy;
  }
  return r;
}

}  // namespace kiln::driver
