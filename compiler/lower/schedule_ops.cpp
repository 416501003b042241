#include "compiler/lower/schedule_ops.h"

#include <algorithm>
#include <functional>
#include <map>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/bound_inference.h"

namespace kiln::lower {

using namespace ir;

namespace {

constexpr const char *kLoopScope = "loop_scope";

Expr and_all(const std::vector<Expr> &conds) {
  Expr r;
  for (const auto &c : conds) r = r.defined() ? (r && c) : c;
  return r;
}

Stmt guard(const std::vector<Expr> &conds, Stmt body) {
  if (conds.empty()) return body;
  return IfThenElseNode::make(likely(and_all(conds)), std::move(body));
}

// Builds the loop nest of one stage.
class StageBuilder {
 public:
  StageBuilder(const te::StageNode &stage, const BoundMap &bounds, const BodyMap &bodies)
      : stage_(stage), bounds_(bounds), bodies_(bodies) {}

  Stmt build() {
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(stage_.op.get());
    KILN_CHECK(c, "stage ", stage_.op->name, " is not a compute");
    const auto &leaves = stage_.leaf_iter_vars;
    for (const auto &iv : leaves) values_[iv.get()] = iv->var;
    pass_up_index(stage_, bounds_, &values_);
    std::unordered_map<const VariableNode *, Expr> &root_subst = root_subst_;
    for (const auto &iv : stage_.root_iter_vars()) {
      Expr v = values_.at(iv.get());
      if (!v.same_as(iv->var)) root_subst[iv->var.get()] = arith::simplify(v);
    }
    std::vector<Expr> indices;
    for (const auto &iv : c->axis)
      indices.push_back(root_subst.count(iv->var.get()) ? root_subst[iv->var.get()] : Expr(iv->var));
    const auto &body = bodies_.at(stage_.op.get());
    for (size_t p = 0; p < leaves.size(); ++p) {
      const te::IterVarAttr *a = stage_.attr(leaves[p]);
      if (a && a->tensor_intrin) return build_tensorized(p, *a->tensor_intrin);
    }
    auto data_preds = split_predicates(stage_, bounds_, values_, false);
    // A region that overhangs the stage's domain (a tile at the edge) is guarded.
    {
      arith::Analyzer an;
      for (const auto &st : attach_path(stage_)) {
        const Range &r = bounds_.at(st.second.get());
        an.bind(st.second->var, r);
      }
      for (size_t d = 0; d < c->axis.size(); ++d) {
        const Range &dom = c->axis[d]->dom;
        const Range &r = bounds_.at(c->axis[d].get());
        if (!an.can_prove(r.min >= dom.min)) data_preds.push_back(indices[d] >= dom.min);
        if (!an.can_prove(r.min + r.extent <= dom.min + dom.extent)) {
          data_preds.push_back(indices[d] < dom.min + dom.extent);
        }
      }
    }
    auto reduce_preds = split_predicates(stage_, bounds_, values_, true);

    if (!c->is_reduction()) {
      std::vector<Stmt> stores;
      for (size_t i = 0; i < body.size(); ++i) {
        stores.push_back(
            ProducerStoreNode::make(stage_.op, static_cast<int>(i), substitute(body[i], root_subst), indices));
      }
      return make_nest(0, leaves.size(), guard(data_preds, BlockNode::make(stores)), true);
    }

    // Reduction: the init nest runs the data-parallel loops inside the first reduction loop's
    // position; the update nest runs every loop from there.
    size_t first_reduce = leaves.size();
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i]->iter_type == IterVarType::CommReduce) {
        first_reduce = i;
        break;
      }
    }
    const auto *r0 = body[0].as<ReduceNode>();
    const auto &comb = *r0->combiner;
    size_t n = body.size();
    // Init.
    std::vector<Stmt> init_stores;
    for (size_t i = 0; i < n; ++i) {
      const auto *r = body[i].as<ReduceNode>();
      init_stores.push_back(
          ProducerStoreNode::make(stage_.op, static_cast<int>(i), comb.identity_element[r->value_index], indices));
    }
    Stmt init = guard(data_preds, BlockNode::make(init_stores));
    std::vector<IterVar> init_loops;
    for (size_t i = first_reduce; i < leaves.size(); ++i) {
      if (leaves[i]->iter_type != IterVarType::CommReduce) init_loops.push_back(leaves[i]);
    }
    for (size_t i = init_loops.size(); i-- > 0;) init = make_loop(init_loops[i], init, false);

    // Update: new = combine(old, source) for every output at once.
    std::unordered_map<const VariableNode *, Expr> m;
    std::vector<Var> temps;
    std::vector<Expr> temp_values;
    for (size_t i = 0; i < n; ++i) {
      m[comb.lhs[i].get()] = ProducerLoadNode::make(stage_.op, static_cast<int>(i), indices);
      m[comb.rhs[i].get()] = substitute(r0->source[i], root_subst);
    }
    std::vector<Stmt> update_stores;
    for (size_t i = 0; i < n; ++i) {
      Expr v = substitute(comb.result[i], m);
      if (n == 1) {
        update_stores.push_back(ProducerStoreNode::make(stage_.op, 0, v, indices));
      } else {
        temps.emplace_back(stage_.op->name + ".v" + std::to_string(i), v.type());
        temp_values.push_back(v);
        update_stores.push_back(ProducerStoreNode::make(stage_.op, static_cast<int>(i), temps.back(), indices));
      }
    }
    Stmt update = BlockNode::make(update_stores);
    for (size_t i = temps.size(); i-- > 0;) update = LetStmtNode::make(temps[i], temp_values[i], update);
    std::vector<Expr> conds = data_preds;
    conds.insert(conds.end(), reduce_preds.begin(), reduce_preds.end());
    if (!is_one(r0->condition)) conds.push_back(substitute(r0->condition, root_subst));
    update = guard(conds, update);
    update = make_nest(first_reduce, leaves.size(), update, true);
    return make_nest(0, first_reduce, BlockNode::make(init, update), true);
  }

 private:
  [[noreturn]] void tensorize_error(const IterVar &at, const te::TensorIntrinNode &intrin, const std::string &why) {
    throw ScheduleError("in stage " + stage_.op->name + ", cannot tensorize axis " + at->var.name() + " with " +
                        intrin.name + ": " + why);
  }

  // The loops from position p inward become one call of the intrinsic, after checking that they
  // compute what the intrinsic's pattern computes.
  Stmt build_tensorized(size_t p, const te::TensorIntrinNode &intrin) {
    const auto *c = static_cast<const te::ComputeOpNode *>(stage_.op.get());
    const auto *ic = dynamic_cast<const te::ComputeOpNode *>(intrin.op.get());
    const auto &leaves = stage_.leaf_iter_vars;
    const IterVar &at = leaves[p];
    if (!ic) tensorize_error(at, intrin, "its pattern is not a compute");
    for (size_t q = p + 1; q < leaves.size(); ++q) {
      const te::IterVarAttr *a = stage_.attr(leaves[q]);
      if (a && (a->tensor_intrin || !a->bind_thread.empty())) {
        tensorize_error(at, intrin, "loop " + leaves[q]->var.name() + " inside it is tensorized or bound to a thread");
      }
    }
    // Map the inner loops to the intrinsic's axes, data loops and reduction loops in order.
    std::vector<IterVar> data_in, reduce_in;
    for (size_t q = p; q < leaves.size(); ++q) {
      (leaves[q]->iter_type == IterVarType::CommReduce ? reduce_in : data_in).push_back(leaves[q]);
    }
    if (data_in.size() != ic->axis.size() || reduce_in.size() != ic->reduce_axis.size()) {
      tensorize_error(
          at, intrin,
          detail::concat("the intrinsic has ", ic->axis.size(), " data and ", ic->reduce_axis.size(),
                         " reduction axes, the loops inside have ", data_in.size(), " and ", reduce_in.size()));
    }
    arith::Analyzer an;
    std::unordered_map<const VariableNode *, Expr> to_intrin, to_zero;
    auto map_axes = [&](const std::vector<IterVar> &mine, const std::vector<IterVar> &theirs) {
      for (size_t q = 0; q < mine.size(); ++q) {
        const Range &r = bounds_.at(mine[q].get());
        if (!is_zero(r.min) || !an.can_prove_equal(r.extent, theirs[q]->dom.extent)) {
          tensorize_error(
              at, intrin,
              detail::concat("loop ", mine[q]->var.name(), " has extent ", r.extent, " but the intrinsic's axis ",
                             theirs[q]->var.name(), " has ", theirs[q]->dom.extent));
        }
        to_intrin[mine[q]->var.get()] = theirs[q]->var;
        to_zero[theirs[q]->var.get()] = make_zero(Int(32));
      }
    };
    map_axes(data_in, ic->axis);
    map_axes(reduce_in, ic->reduce_axis);
    // Root variables in terms of the outer loops and the intrinsic's axes.
    std::unordered_map<const VariableNode *, Expr> root;
    for (const auto &iv : stage_.root_iter_vars()) {
      root[iv->var.get()] = an.simplify(substitute(values_.at(iv.get()), to_intrin));
    }
    auto rebase = [&](const std::vector<Expr> &idx, size_t rank, std::vector<Expr> *begin) {
      std::vector<Expr> rel;
      begin->clear();
      for (const auto &e : idx) {
        Expr b = an.simplify(substitute(e, to_zero));
        begin->push_back(b);
        rel.push_back(an.simplify(e - b));
      }
      if (rel.size() < rank)
        tensorize_error(at, intrin, "a region of the intrinsic has more dimensions than the tensor");
      for (size_t d = 0; d + rank < rel.size(); ++d) {
        if (!is_zero(rel[d])) tensorize_error(at, intrin, "it reads across an outer dimension of a tensor");
      }
      return std::vector<Expr>(rel.end() - static_cast<std::ptrdiff_t>(rank), rel.end());
    };
    // Reads of the stage's inputs become reads of the intrinsic's placeholders.
    std::vector<std::pair<const te::OperationNode *, int>> inputs_seen;
    std::vector<std::vector<Expr>> input_begin;
    std::vector<te::Operation> input_ops;
    std::function<Expr(const Expr &)> rewrite = [&](const Expr &e) {
      return ir_transform(e, [&](const Expr &x) -> Expr {
        const auto *l = x.as<ProducerLoadNode>();
        if (!l) return Expr();
        const te::Operation producer = te::operation_of(l->producer);
        auto key = std::make_pair(producer.get(), l->value_index);
        size_t j = std::find(inputs_seen.begin(), inputs_seen.end(), key) - inputs_seen.begin();
        if (j == inputs_seen.size()) {
          if (j >= intrin.inputs.size()) tensorize_error(at, intrin, "the stage reads more tensors than the intrinsic");
          inputs_seen.push_back(key);
          input_ops.push_back(producer);
          input_begin.emplace_back();
        }
        const te::Tensor &ph = intrin.inputs[j];
        std::vector<Expr> begin;
        auto rel = rebase(l->indices, ph.shape().size(), &begin);
        if (input_begin[j].empty()) input_begin[j] = begin;
        return ProducerLoadNode::make(ph.op(), ph.value_index(), rel);
      });
    };
    const auto &body = bodies_.at(stage_.op.get());
    for (size_t i = 0; i < body.size(); ++i) {
      Expr mine = body[i], theirs = ic->body.at(i);
      if (const auto *r = mine.as<ReduceNode>()) {
        const auto *ir_ = theirs.as<ReduceNode>();
        if (!ir_) tensorize_error(at, intrin, "the stage is a reduction and the intrinsic is not");
        Expr src = an.simplify(rewrite(substitute(r->source[r->value_index], root)));
        Expr isrc = an.simplify(ir_->source[ir_->value_index]);
        bool same_reducer = r->combiner->result.size() == ir_->combiner->result.size();
        for (size_t k = 0; same_reducer && k < r->combiner->result.size(); ++k) {
          same_reducer = structural_equal(r->combiner->result[k], ir_->combiner->result[k], FreeVars::Mapped) &&
                         structural_equal(r->combiner->identity_element[k], ir_->combiner->identity_element[k]);
        }
        if (!same_reducer) tensorize_error(at, intrin, "the reductions combine differently");
        if (!structural_equal(src, isrc)) {
          tensorize_error(at, intrin,
                          "the computation does not match: the stage computes " + to_string(src) + ", the intrinsic " +
                              to_string(isrc));
        }
      } else {
        if (theirs.as<ReduceNode>()) tensorize_error(at, intrin, "the intrinsic is a reduction and the stage is not");
        Expr v = an.simplify(rewrite(substitute(mine, root)));
        Expr iv = an.simplify(theirs);
        if (!structural_equal(v, iv)) {
          tensorize_error(at, intrin,
                          "the computation does not match: the stage computes " + to_string(v) + ", the intrinsic " +
                              to_string(iv));
        }
      }
    }
    if (inputs_seen.size() != intrin.inputs.size())
      tensorize_error(at, intrin, "the stage reads fewer tensors than the intrinsic");
    // Buffers standing for the regions; storage flattening binds them to the real buffers.
    te::TensorIntrinBuffers bufs;
    struct Bind {
      Expr region;  // ProducerLoad of the real tensor at the region's first element
      Buffer buf;
      Var offset;
    };
    std::vector<Bind> binds;
    auto make_region_buffer = [&](const te::Tensor &ph, const te::Operation &real_op, int vi,
                                  const std::vector<Expr> &begin) {
      Buffer b = make_buffer(ph.name(), ph.dtype(), ph.shape());
      for (size_t d = 0; d < b.strides.size(); ++d) b.strides[d] = Var(ph.name() + ".stride" + std::to_string(d));
      Var off(ph.name() + ".elem_offset");
      binds.push_back({ProducerLoadNode::make(real_op, vi, begin), b, off});
      return std::make_pair(b, off);
    };
    for (size_t j = 0; j < intrin.inputs.size(); ++j) {
      auto [b, off] = make_region_buffer(intrin.inputs[j], input_ops[j], inputs_seen[j].second, input_begin[j]);
      bufs.inputs.push_back(b);
      bufs.input_offsets.push_back(off);
    }
    std::vector<Expr> out_begin;
    for (const auto &iv : c->axis) out_begin.push_back(an.simplify(substitute(root.at(iv->var.get()), to_zero)));
    for (int i = 0; i < ic->num_outputs(); ++i) {
      te::Tensor ph = ic->output(i);
      std::vector<Expr> begin = out_begin;
      auto [b, off] = make_region_buffer(ph, stage_.op, i, begin);
      bufs.outputs.push_back(b);
      bufs.output_offsets.push_back(off);
    }
    Stmt call;
    size_t first_reduce = leaves.size();
    for (size_t q = 0; q < leaves.size(); ++q) {
      if (leaves[q]->iter_type == IterVarType::CommReduce) {
        first_reduce = q;
        break;
      }
    }
    if (!c->is_reduction() || first_reduce >= p) {
      call = intrin.body(bufs);
    } else {
      if (!intrin.reset || !intrin.update) {
        tensorize_error(at, intrin, "reduction loops outside it need the intrinsic's reset and update functions");
      }
      Expr first;
      for (size_t q = 0; q < p; ++q) {
        if (leaves[q]->iter_type != IterVarType::CommReduce) continue;
        Expr e = leaves[q]->var == bounds_.at(leaves[q].get()).min;
        first = first.defined() ? (first && e) : e;
      }
      call = BlockNode::make(IfThenElseNode::make(first, intrin.reset(bufs)), intrin.update(bufs));
    }
    if (!call.defined()) tensorize_error(at, intrin, "its body function returned nothing");
    for (auto it = binds.rbegin(); it != binds.rend(); ++it) {
      std::vector<Expr> args{it->buf.data, it->offset};
      args.insert(args.end(), it->buf.strides.begin(), it->buf.strides.end());
      call = AttrStmtNode::make(it->region, attr::kBufferBindScope,
                                CallNode::make(Handle(), "buffer_bind", args, CallNode::Kind::Intrinsic), call);
    }
    return make_nest(0, p, call, true);
  }

  Stmt make_nest(size_t begin, size_t end, Stmt body, bool markers) {
    for (size_t i = end; i-- > begin;) body = make_loop(stage_.leaf_iter_vars[i], body, markers);
    return body;
  }

  Stmt make_loop(const IterVar &iv, Stmt body, bool marker) {
    const Range &r = bounds_.at(iv.get());
    const te::IterVarAttr *a = stage_.attr(iv);
    ForKind kind = a ? a->for_kind : ForKind::Serial;
    std::string tag = a ? a->bind_thread : "";
    if (!tag.empty()) kind = ForKind::ThreadBinding;
    Var loop_var = iv->var;
    Expr mn = r.min;
    if (a && marker && !a->prefetches.empty()) {  // at the start of each iteration
      // The loops inside this one are at their first iteration.
      const auto &leaves = stage_.leaf_iter_vars;
      std::unordered_map<const VariableNode *, Expr> first;
      for (size_t q = std::find(leaves.begin(), leaves.end(), iv) - leaves.begin() + 1; q < leaves.size(); ++q) {
        first[leaves[q]->var.get()] = bounds_.at(leaves[q].get()).min;
      }
      std::vector<Stmt> stmts;
      for (const auto &p : a->prefetches) {
        std::vector<Expr> idx;
        for (const auto &e : p.indices) idx.push_back(arith::simplify(substitute(substitute(e, root_subst_), first)));
        stmts.push_back(
            EvaluateNode::make(prefetch(ProducerLoadNode::make(p.tensor.op(), p.tensor.value_index(), idx))));
      }
      stmts.push_back(body);
      body = BlockNode::make(stmts);
    }
    if (!is_zero(mn) && (kind == ForKind::Vectorized || kind == ForKind::ThreadBinding)) {
      // Vector lanes and threads count from zero; the axis is the loop variable plus the minimum.
      // The body built so far uses the sum directly (so that indices stay linear in the loop
      // variable); the let serves stages attached inside this loop later.
      Var v0(iv->var.name() + ".r");
      body = substitute(body, {{iv->var.get(), v0 + mn}});
      if (marker) body = AttrStmtNode::make(iv->var, kLoopScope, make_zero(Int(32)), body);
      body = LetStmtNode::make(iv->var, v0 + mn, body);
      loop_var = v0;
      mn = make_zero(Int(32));
    } else if (marker) {
      body = AttrStmtNode::make(iv->var, kLoopScope, make_zero(Int(32)), body);
    }
    Stmt loop = ForNode::make(loop_var, mn, r.extent, kind, body, tag);
    if (a) {
      for (auto it = a->pragmas.rbegin(); it != a->pragmas.rend(); ++it) {
        loop = AttrStmtNode::make(iv->var, attr::kPragmaPrefix + it->first, it->second, loop);
      }
    }
    return loop;
  }

  const te::StageNode &stage_;
  const BoundMap &bounds_;
  const BodyMap &bodies_;
  IndexMap values_;
  std::unordered_map<const VariableNode *, Expr> root_subst_;  // root variables -> loop expressions
};

std::vector<Range> realize_bounds(const te::StageNode &s, const BoundMap &bounds) {
  std::vector<Range> r;
  const auto *c = dynamic_cast<const te::ComputeOpNode *>(s.op.get());
  for (const auto &iv : c->axis) r.push_back(bounds.at(iv.get()));
  return r;
}

Stmt make_pipeline(const te::StageNode &s, const BoundMap &bounds, const BodyMap &bodies, Stmt consumer) {
  Stmt produce = StageBuilder(s, bounds, bodies).build();
  Stmt body = BlockNode::make(produce, consumer);
  auto rb = realize_bounds(s, bounds);
  for (int i = s.op->num_outputs(); i-- > 0;) {
    body = ProducerRealizeNode::make(s.op, i, rb, s.scope, body);
  }
  if (s.double_buffer) body = AttrStmtNode::make(Expr(), attr::kDoubleBuffer, make_one(Int(32)), body);
  return body;
}

// Inserts a producer pipeline at the attach point (the loop_scope marker of a loop variable).
class AttachInjector : public IRMutator {
 public:
  AttachInjector(const te::StageNode &s, const BoundMap &bounds, const BodyMap &bodies)
      : s_(s), bounds_(bounds), bodies_(bodies) {}
  using IRMutator::mutate;
  bool found = false;

 protected:
  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    if (op->key == kLoopScope && op->node.same_as(s_.attach_ivar->var)) {
      if (found) throw InternalError("attach point of " + s_.op->name + " found twice");
      found = true;
      return AttrStmtNode::make(op->node, op->key, op->value, make_pipeline(s_, bounds_, bodies_, op->body));
    }
    return IRMutator::visit(op, self);
  }

 private:
  const te::StageNode &s_;
  const BoundMap &bounds_;
  const BodyMap &bodies_;
};

class MarkerRemover : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    if (op->key == kLoopScope) return mutate(op->body);
    return IRMutator::visit(op, self);
  }
};

// A thread loop nested in a loop of the same thread tag is the same thread: it becomes a let of
// the outer thread variable, guarded when its extent is smaller.
class ThreadUnifier : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    if (op->kind != ForKind::ThreadBinding || op->thread_tag == "vthread") return IRMutator::visit(op, self);
    auto it = active_.find(op->thread_tag);
    if (it == active_.end()) {
      active_[op->thread_tag] = op;
      Stmt r = IRMutator::visit(op, self);
      active_.erase(op->thread_tag);
      return r;
    }
    const ForNode *outer = it->second;
    Stmt body = mutate(op->body);
    arith::Analyzer an;
    if (!an.can_prove(op->extent <= outer->extent)) {
      throw ScheduleError(detail::concat("loop ", op->loop_var.name(), " bound to ", op->thread_tag, " has extent ",
                                         op->extent, ", larger than the enclosing ", op->thread_tag, " extent ",
                                         outer->extent, " of loop ", outer->loop_var.name()));
    }
    body = LetStmtNode::make(op->loop_var, outer->loop_var, body);
    if (!an.can_prove_equal(op->extent, outer->extent)) {
      body = IfThenElseNode::make(outer->loop_var < op->extent, body);
    }
    return body;
  }

 private:
  std::map<std::string, const ForNode *> active_;
};

}  // namespace

Stmt schedule_ops(const te::Schedule &sch, const BoundMap &bounds, const BodyMap &bodies,
                  const InlinedArgs &inlined_args) {
  Stmt body = make_nop();
  const auto &stages = sch.stages();
  for (size_t i = stages.size(); i-- > 0;) {
    const te::StageNode &s = *stages[i];
    if (s.is_placeholder() || without_nest(s, inlined_args)) continue;
    if (s.attach_type != te::AttachType::Scope) {  // at the root, or an inlined argument
      body = make_pipeline(s, bounds, bodies, body);
      continue;
    }
    const te::StageNode *target = s.attach_stage;
    if (target->attach_type == te::AttachType::Inline) {
      throw ScheduleError("stage " + s.op->name + " is computed at stage " + target->op->name +
                          ", which is inlined; attach it elsewhere");
    }
    attach_path(s);  // reports an attach point that is no longer a loop
    AttachInjector inj(s, bounds, bodies);
    body = inj.mutate(body);
    if (!inj.found) {
      throw ScheduleError("stage " + s.op->name + " is computed at axis " + s.attach_ivar->var.name() + " of stage " +
                          target->op->name + ", but that loop was not generated");
    }
  }
  body = MarkerRemover().mutate(body);
  body = ThreadUnifier().mutate(body);
  return body;
}

}  // namespace kiln::lower
