#include "compiler/lower/lower.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/lower/bound_inference.h"
#include "compiler/lower/double_buffer.h"
#include "compiler/lower/inline.h"
#include "compiler/lower/schedule_ops.h"
#include "compiler/lower/storage_flatten.h"
#include "compiler/lower/thread_sync.h"
#include "compiler/pass/passes.h"

namespace kiln::lower {

using namespace ir;

LowerOptions LowerOptions::from_env() {
  LowerOptions o;
  const char *d = std::getenv("KILN_DEBUG_LOWER");
  o.debug = d && *d && std::string(d) != "0";
  return o;
}

namespace {

// Binds argument tensors to buffers and collects the symbolic sizes.
void bind_arguments(const te::Schedule &sch, const std::vector<te::Tensor> &args, LoweredFunc *f, BufferBinds *binds,
                    InlinedArgs *inlined_args) {
  std::set<std::string> names;
  std::set<const VariableNode *> size_set;
  std::set<std::pair<const te::OperationNode *, int>> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const te::Tensor &t = args[i];
    if (!t.defined()) throw ExprError(detail::concat("argument ", i, " of ", f->name, " is undefined"));
    te::Stage st = sch.stage_of(t.op().get());
    if (!st.defined()) {
      throw ExprError("argument " + t.name() + " of " + f->name + " is not part of the schedule");
    }
    if (!seen.insert({st->origin_op.get(), t.value_index()}).second) {
      throw ExprError("argument " + t.name() + " of " + f->name + " is listed twice");
    }
    // An inlined stage passed as an argument is computed into it as well.
    if (st->attach_type == te::AttachType::Inline) inlined_args->insert(st.get());
    std::string name = t.name();
    if (t.op()->num_outputs() > 1) name += ".v" + std::to_string(t.value_index());
    while (!names.insert(name).second) name += "_";
    Buffer b = make_buffer(name, t.dtype(), t.shape());
    (*binds)[{st->op.get(), t.value_index()}] = b;
    (*binds)[{st->origin_op.get(), t.value_index()}] = b;
    (*binds)[{t.op().get(), t.value_index()}] = b;
    f->params.push_back(b);
  }
  // Size variables: each must appear as a whole dimension of some argument.
  std::vector<const VariableNode *> whole;
  for (const auto &b : f->params) {
    for (const auto &d : b.shape) {
      if (const auto *v = d.as<VariableNode>()) {
        if (size_set.insert(v).second) f->size_vars.push_back(Var(d));
      }
    }
  }
  for (const auto &b : f->params) {
    for (const auto &d : b.shape) {
      post_order_visit(d, [&](const IRNode *n) {
        if (n->node_type == NodeType::Variable && !size_set.count(static_cast<const VariableNode *>(n))) {
          throw ExprError("size variable " + static_cast<const VariableNode *>(n)->name + " of argument " + b.name +
                          " cannot be derived: it must also be a whole dimension of some argument");
        }
      });
    }
  }
  // Every input that is read and every output must be passed.
  for (const auto &s : sch.stages()) {
    bool needed = s->is_output;
    if (s->is_placeholder()) {
      for (const auto &o : sch.stages()) {
        for (const auto &in : o->op->input_tensors()) {
          if (in.op() == s->op) needed = true;
        }
      }
    }
    if (!needed) continue;
    for (int i = 0; i < s->op->num_outputs(); ++i) {
      if (!binds->count({s->op.get(), i})) {
        throw ExprError(std::string(s->is_output ? "output " : "input ") + s->op->name +
                        (s->op->num_outputs() > 1 ? ".v" + std::to_string(i) : "") + " must be an argument of " +
                        f->name);
      }
    }
  }
}

class PassTimer {
 public:
  PassTimer(const LowerOptions &options, const LoweredFunc &f)
      : debug_(options.debug), seconds_(options.pass_seconds), f_(f), last_(std::chrono::steady_clock::now()) {}
  void after(const char *pass) {
    if (!debug_ && !seconds_) return;
    auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    if (seconds_) (*seconds_)[pass] += s;
    if (debug_) std::cerr << "=== after " << pass << " (" << s * 1e3 << " ms) ===\n" << f_.body << "\n";
    last_ = std::chrono::steady_clock::now();
  }

 private:
  bool debug_;
  std::map<std::string, double> *seconds_;
  const LoweredFunc &f_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

LoweredFunc lower(const te::Schedule &sch, const std::vector<te::Tensor> &args, const std::string &name,
                  const LowerOptions &options) {
  LoweredFunc f;
  f.name = name;
  BufferBinds binds;
  InlinedArgs inlined_args;
  bind_arguments(sch, args, &f, &binds, &inlined_args);
  PassTimer timer(options, f);

  BodyMap bodies = inline_bodies(sch);
  BoundMap bounds = infer_bound(sch, bodies, inlined_args);
  timer.after("infer_bound");
  f.body = schedule_ops(sch, bounds, bodies, inlined_args);
  timer.after("schedule_ops");
  f.body = storage_flatten(f.body, binds, sch);
  timer.after("storage_flatten");
  f.body = inject_double_buffer(f.body);
  timer.after("inject_double_buffer");
  f.body = thread_sync(f.body);
  timer.after("thread_sync");
  f.body = arith::simplify(f.body);
  timer.after("simplify");
  const ir::Stmt simplified = f.body;
  f.body = pass::fuse_with_next_loops(f.body);
  timer.after("fuse_with_next_loops");
  f.body = pass::pipeline_loops(f.body);
  timer.after("pipeline_loops");
  if (options.partition_loops) {
    f.body = pass::loop_partition(f.body);
    timer.after("loop_partition");
  }
  if (options.unroll) {
    f.body = pass::unroll_loops(f.body);
    timer.after("unroll_loops");
  }
  if (options.vectorize) {
    f.body = pass::vectorize_loops(f.body);
    timer.after("vectorize_loops");
  }
  if (options.reuse_storage) {
    f.body = pass::storage_rewrite(f.body);
    timer.after("storage_rewrite");
  }
  // Simplified again after the passes that rewrite loops; a body none of them changed (the cost
  // model's lowering turns most of them off) is simplified already: simplify is idempotent on it,
  // and the second run would be a third of such a lowering's time.
  if (!f.body.same_as(simplified)) {
    f.body = arith::simplify(f.body);
    timer.after("simplify");
  }
  f.body = pass::remove_no_op(f.body);
  timer.after("remove_no_op");
  pass::verify_ir(f);
  timer.after("verify_ir");
  return f;
}

}  // namespace kiln::lower
