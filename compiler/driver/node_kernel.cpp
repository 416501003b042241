#include "compiler/driver/node_kernel.h"

#include <algorithm>
#include <sstream>

#include "compiler/driver/target.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ops/generic_schedule.h"
#include "compiler/ops/tuning_task.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "contracts/sha256.h"

namespace kiln::driver {

using graph::GraphError;
using graph::Node;
using graph::OpContext;
using graph::OpDef;
using graph::TensorType;
using ::kiln::detail::concat;

namespace {

std::string data_hash(const deploy::Tensor &t) {
  return contracts::sha256_hex(std::string_view(static_cast<const char *>(t.data()), t.nbytes()));
}

std::string signature(const graph::Graph &g, const Node &n, const OpDef &def, const std::string &target) {
  std::ostringstream os;
  os << n.op << "|" << target << "|";
  for (const auto &[k, a] : n.attrs) {
    os << k << "=" << a.str();
    if (a.kind == graph::Attribute::Kind::Tensor) os << "#" << data_hash(a.tensor);
    os << ";";
  }
  os << "|";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == graph::kNoValue) {
      os << "_,";
      continue;
    }
    const auto &v = g.value(n.inputs[i]);
    os << v.type.str();
    const bool ct =
        std::find(def.const_inputs.begin(), def.const_inputs.end(), static_cast<int>(i)) != def.const_inputs.end();
    if (ct && v.is_constant()) os << "#" << data_hash(v.constant);
    os << ",";
  }
  os << "|";
  for (graph::ValueId o : n.outputs) os << g.value(o).type.str() << ",";
  return os.str();
}

// How many of compute `c`'s innermost axes every tensor it reads takes as its own innermost indices,
// in order and unchanged: its output's rank for an elementwise compute, the axes a transpose keeps
// innermost (a channel shuffle's H and W), 0 where a read is transposed, offset or broadcast there.
int kept_inner_axes(const te::ComputeOpNode &c) {
  const int nd = static_cast<int>(c.axis.size());
  int kept = nd;
  for (const ir::Expr &b : c.body) {
    ir::post_order_visit(b, [&](const ir::IRNode *n) {
      if (n->node_type != ir::ProducerLoadNode::kNodeType) return;
      const auto &idx = static_cast<const ir::ProducerLoadNode *>(n)->indices;
      int k = 0;
      while (k < kept && k < static_cast<int>(idx.size())) {
        if (!idx[idx.size() - 1 - static_cast<size_t>(k)].same_as(c.axis[static_cast<size_t>(nd - 1 - k)]->var)) break;
        ++k;
      }
      kept = std::min(kept, k);
    });
  }
  return kept;
}

// A generic CPU schedule: intermediate elementwise stages inlined; each output's loops fused and
// split into blocks of 64, the outer loop parallel. An output whose innermost extent is a whole
// number of 4-lane vectors up to 64 (a blocked layout's channel block) keeps that axis, vectorized,
// under the fused outer loops (so a Concat of NCHWc tensors copies whole blocks). An output that
// reads its inputs transposed but keeps its innermost axes of at least 16 elements as they are (a
// channel shuffle's Transpose of [N, g, C/g, H, W]) fuses those into rows, vectorized in blocks of 16
// with a partial last block, under the fused outer loops: each row is one contiguous copy, where
// one fused loop would gather every element.
void schedule_generic(te::Schedule &s, const std::vector<te::Tensor> &outputs) {
  ops::inline_intermediate_stages(s);
  for (const auto &t : outputs) {
    te::Stage st = s[t];
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(t.op().get());
    if (!c) continue;
    std::vector<te::IterVar> axes;
    for (int i = 0; i < t.ndim(); ++i) axes.push_back(st.axis(static_cast<size_t>(i)));
    const int64_t inner = t.ndim() >= 2 ? ir::as_const_int(t.shape().back()).value_or(0) : 0;
    if (inner >= 4 && inner <= 64 && inner % 4 == 0) {
      te::IterVar last = axes.back(), outer = axes.front();
      axes.pop_back();
      if (axes.size() > 1) st.fuse(axes, &outer);
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < t.shape().size(); ++d) rows *= ir::as_const_int(t.shape()[d]).value_or(1);
      if (rows * inner > 4096) st.parallel(outer);
      st.vectorize(last);
      continue;
    }
    int64_t total = 1;
    for (const auto &d : t.shape()) total *= ir::as_const_int(d).value_or(1);
    const int kept = kept_inner_axes(*c);
    int64_t row = 1;
    for (int d = t.ndim() - kept; d < t.ndim(); ++d)
      row *= ir::as_const_int(t.shape()[static_cast<size_t>(d)]).value_or(1);
    if (kept > 0 && kept < t.ndim() && row >= 16 && row < total) {
      te::IterVar outer = axes.front(), inner = axes[static_cast<size_t>(t.ndim() - kept)];
      const std::vector<te::IterVar> outer_axes(axes.begin(), axes.end() - kept),
          inner_axes(axes.end() - kept, axes.end());
      if (outer_axes.size() > 1) st.fuse(outer_axes, &outer);
      if (inner_axes.size() > 1) st.fuse(inner_axes, &inner);
      te::IterVar io, ii;
      st.split(inner, ir::make_const(ir::Int(32), int64_t{16}), &io, &ii);
      if (total > 4096) st.parallel(outer);
      st.vectorize(ii);
      continue;
    }
    te::IterVar fused;
    st.fuse(axes, &fused);
    if (total > 4096) {
      te::IterVar outer, inner;
      st.split(fused, ir::make_const(ir::Int(32), int64_t{64}), &outer, &inner);
      st.parallel(outer);
    }
  }
}

// A template kernel's task and the config it is built with: the lookup's when it has a usable one.
void choose_config(NodeKernel &k, const Node &n, const ExecutorOptions &options) {
  k.task = std::make_unique<ops::Task>(k.kernel.template_name, k.kernel.template_args, *k.target);
  k.tuned_as_task = tuned_as_task(n, k.kernel);
  if (!k.tuned_as_task) return;
  k.report.node = n.name;
  k.report.template_name = k.kernel.template_name;
  // Reported and looked up as the task it is tuned as (its anchor's workload).
  const ops::Task tuned_as = ops::tuning_task(*k.task);
  k.report.workload_key = tuned_as.key();
  k.report.args_json = tuned_as.workload().args_json;
  const ops::TunedChoice c = ops::choose_tuned_config(options.configs, *k.task);
  k.config = c.config;
  k.report.record = c.record;
  if (c.config) {
    k.report.source = c.exact_target ? KernelReport::Source::kExact : KernelReport::Source::kDeviceClass;
    if (c.default_kept) k.report.note = "the default config: no record of another beats its record clearly";
  } else if (c.found) {
    k.report.source = KernelReport::Source::kStale;
    k.report.note = c.stale;
  }
}

}  // namespace

bool tuned_as_task(const Node &n, const graph::Kernel &k) {
  return !k.template_name.empty() && n.op != graph::kLayoutTransformOp;
}

bool needs_kernel(const graph::Graph &g, const Node &n, const OpDef &def) {
  if (def.view || def.evaluate) return false;
  for (graph::ValueId o : n.outputs) {
    if (g.value(o).type.numel() == 0) return false;
  }
  return true;
}

NodeKernel prepare_node_kernel(const graph::Graph &g, const Node &n, const OpDef &def, const ExecutorOptions &options) {
  OpContext ctx(g, n);
  NodeKernel k;
  try {
    k.kernel = def.kernel(ctx);
    k.target = resolve_target(options.target);
    k.signature = signature(g, n, def, options.target);
    if (k.from_template()) {
      choose_config(k, n, options);
      if (k.config)
        k.signature += "|config=" + k.config->record().space + ":" + std::to_string(k.config->record().index);
    }
  } catch (const GraphError &) {
    throw;
  } catch (const UserError &e) {
    throw GraphError(concat(n.describe(), ": ", e.what()));
  }
  return k;
}

ir::LoweredFunc lower_node_kernel(const graph::Graph &g, const Node &n, const NodeKernel &k, const std::string &name) {
  OpContext ctx(g, n);
  try {
    if (k.from_template()) return k.task->lower(k.config ? *k.config : k.task->default_config(), name);
    if (k.kernel.outputs.empty()) ctx.fail("the op built no kernel outputs");
    auto s = te::create_schedule(k.kernel.outputs);
    if (k.kernel.layout_transform_output && k.target) {
      ops::schedule_layout_transform(*s, k.kernel.outputs[0], *k.target);
    } else {
      schedule_generic(*s, k.kernel.outputs);
    }
    std::vector<te::Tensor> args = k.kernel.placeholders;
    args.insert(args.end(), k.kernel.outputs.begin(), k.kernel.outputs.end());
    return lower::lower(*s, args, name);
  } catch (const GraphError &) {
    throw;
  } catch (const UserError &e) {
    throw GraphError(concat(n.describe(), ": ", e.what()));
  }
}

}  // namespace kiln::driver
