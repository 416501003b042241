#include "compiler/lower/bound_inference.h"

#include <algorithm>
#include <unordered_set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/lower/interval.h"

namespace kiln::lower {

using namespace ir;

std::vector<std::pair<const te::StageNode *, IterVar>> attach_path(const te::StageNode &stage) {
  std::vector<std::pair<const te::StageNode *, IterVar>> path;
  const te::StageNode *s = &stage;
  int guard = 0;
  while (s->attach_type == te::AttachType::Scope) {
    if (++guard > 1000) throw ScheduleError("in stage " + stage.op->name + ": compute_at forms a cycle");
    const te::StageNode *a = s->attach_stage;
    std::vector<std::pair<const te::StageNode *, IterVar>> level;
    auto &leaves = a->leaf_iter_vars;
    auto pos = std::find(leaves.begin(), leaves.end(), s->attach_ivar);
    if (pos == leaves.end()) {
      throw ScheduleError("stage " + s->op->name + " is computed at axis " + s->attach_ivar->var.name() + " of stage " +
                          a->op->name + ", which is no longer a loop of " + a->op->name + " (it was split or fused)");
    }
    for (auto it = leaves.begin(); it <= pos; ++it) level.emplace_back(a, *it);
    path.insert(path.begin(), level.begin(), level.end());
    s = a;
  }
  return path;
}

namespace {

// Storage rank vs thread rank (as in CUDA): a shared buffer is filled by all threads of a block,
// so threadIdx loops outside its attach point still vary; a global one by all blocks too.
bool relax_thread(const std::string &scope, const std::string &tag) {
  if (tag.empty() || tag == "vthread") return false;
  int thread_rank = tag.rfind("blockIdx", 0) == 0 ? 0 : 1;
  int scope_rank = scope == "global" ? 0 : scope == "shared" ? 1 : 2;
  return scope_rank <= thread_rank;
}

void collect_reads(const Expr &e, const te::OperationNode *producer, int value_index,
                   std::vector<std::vector<Expr>> *reads) {
  post_order_visit(e, [&](const IRNode *n) {
    if (n->node_type != NodeType::ProducerLoad) return;
    const auto *l = static_cast<const ProducerLoadNode *>(n);
    if (l->producer.get() != producer || (value_index >= 0 && l->value_index != value_index)) return;
    reads->push_back(l->indices);
  });
}

// Reduce bodies are visited through their source and condition.
void collect_reads_body(const std::vector<Expr> &body, const te::OperationNode *producer,
                        std::vector<std::vector<Expr>> *reads) {
  for (const auto &b : body) {
    if (const auto *r = b.as<ReduceNode>()) {
      for (const auto &s : r->source) collect_reads(s, producer, -1, reads);
      collect_reads(r->condition, producer, -1, reads);
    } else {
      collect_reads(b, producer, -1, reads);
    }
  }
}

}  // namespace

namespace {

// Every stage that reads an attached stage must run inside its attach point: the attach stage
// itself, or a stage attached (through any chain) into it at the same loop or deeper.
void check_attachments(const te::Schedule &sch, const BodyMap &bodies, const InlinedArgs &inlined_args) {
  for (const auto &s : sch.stages()) {
    if (s->attach_type != te::AttachType::Scope) continue;
    const te::StageNode *a = s->attach_stage;
    const auto &al = a->leaf_iter_vars;
    auto pos_of = [&](const IterVar &iv) { return std::find(al.begin(), al.end(), iv) - al.begin(); };
    for (const auto &c : sch.stages()) {
      if (c.get() == s.get() || without_nest(*c, inlined_args)) continue;
      auto bit = bodies.find(c->op.get());
      if (bit == bodies.end()) continue;
      std::vector<std::vector<Expr>> reads;
      collect_reads_body(bit->second, s->op.get(), &reads);
      if (reads.empty() || c.get() == a) continue;
      const te::StageNode *x = c.get();
      bool inside = false;
      while (x->attach_type == te::AttachType::Scope) {
        if (x->attach_stage == a) {
          inside = pos_of(x->attach_ivar) >= pos_of(s->attach_ivar);
          break;
        }
        x = x->attach_stage;
      }
      if (!inside) {
        throw ScheduleError("stage " + s->op->name + " is computed at axis " + s->attach_ivar->var.name() +
                            " of stage " + a->op->name + ", but its reader " + c->op->name +
                            " does not run inside that loop (attach " + c->op->name + " there too, or deeper)");
      }
    }
  }
}

}  // namespace

BoundMap infer_bound(const te::Schedule &sch, const BodyMap &bodies, const InlinedArgs &inlined_args) {
  BoundMap bounds;
  const auto &stages = sch.stages();
  for (const auto &s : stages) {
    if (s->attach_type == te::AttachType::Scope) attach_path(*s);
  }
  check_attachments(sch, bodies, inlined_args);
  // Known facts for simplification: symbolic sizes are positive; every loop variable lies in its
  // range once that range is known.
  arith::Analyzer an;
  std::unordered_set<const VariableNode *> sizes;
  for (const auto &st : stages) {
    for (int i = 0; i < st->op->num_outputs(); ++i) {
      for (const auto &d : st->op->output_shape(i)) {
        ir_transform(d, [&](const Expr &x) -> Expr {
          const auto *v = x.as<VariableNode>();
          if (v && sizes.insert(v).second) an.bind(Var(x), Range(1, make_const(Int(32), int64_t{0x7ffffffe})));
          return Expr();
        });
      }
    }
  }
  for (size_t si = stages.size(); si-- > 0;) {
    const te::StageNode &s = *stages[si];
    if (without_nest(s, inlined_args)) continue;
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(s.op.get());
    if (!c) continue;

    std::vector<Interval> region(c->axis.size());
    bool have_region = false;
    // An output, or an inlined argument, is computed whole.
    if (!s.is_output && !inlined_args.count(&s)) {
      // Loops fixed at the attach point.
      std::unordered_set<const VariableNode *> fixed;
      for (const auto &[st, iv] : attach_path(s)) {
        const auto *a = st->attr(iv);
        if (a && relax_thread(s.scope, a->bind_thread)) continue;
        fixed.insert(iv->var.get());
      }
      // Every other loop of an already-bounded stage runs over its range.
      RelaxMap relax;
      for (size_t ci = si + 1; ci < stages.size(); ++ci) {
        const te::StageNode &cs = *stages[ci];
        for (const auto &iv : cs.leaf_iter_vars) {
          if (fixed.count(iv->var.get())) continue;
          auto it = bounds.find(iv.get());
          if (it == bounds.end()) continue;
          relax[iv->var.get()] = {it->second.min, it->second.min + it->second.extent - 1};
        }
      }
      for (size_t ci = si + 1; ci < stages.size(); ++ci) {
        const te::StageNode &cs = *stages[ci];
        if (without_nest(cs, inlined_args)) continue;
        auto bit = bodies.find(cs.op.get());
        if (bit == bodies.end()) continue;
        std::vector<std::vector<Expr>> reads;
        collect_reads_body(bit->second, s.op.get(), &reads);
        if (reads.empty()) continue;
        // Express the consumer's root variables through its loop variables.
        IndexMap values;
        for (const auto &iv : cs.leaf_iter_vars) values[iv.get()] = iv->var;
        pass_up_index(cs, bounds, &values);
        std::unordered_map<const VariableNode *, Expr> root_values;
        for (const auto &iv : cs.root_iter_vars()) {
          auto vit = values.find(iv.get());
          if (vit != values.end() && !vit->second.same_as(iv->var)) root_values[iv->var.get()] = vit->second;
        }
        for (const auto &idx : reads) {
          for (size_t d = 0; d < idx.size() && d < region.size(); ++d) {
            Interval iv = eval_interval(substitute(idx[d], root_values), relax);
            region[d] = have_region ? union_interval(region[d], iv) : iv;
          }
          have_region = true;
        }
      }
    }

    for (size_t d = 0; d < c->axis.size(); ++d) {
      const Range &dom = c->axis[d]->dom;
      Range r = dom;
      if (have_region) {
        Expr lo = region[d].min, hi = region[d].max;
        Expr dom_hi = dom.min + dom.extent - 1;
        // A region of constant size (a tile) keeps that size even where it overhangs the domain,
        // so that its loops have constant extents; the stage guards the overhang (schedule_ops).
        // Otherwise clip to the domain: a consumer never needs what the producer does not define.
        if (lo.defined() && hi.defined() && lo.type() == dom.min.type() && hi.type() == dom.min.type()) {
          Expr ext = an.simplify(hi - lo + 1);
          auto ce = as_const_int(ext), cd = as_const_int(dom.extent);
          if (ce && *ce > 0 && (!cd || *ce < *cd)) {
            bounds[c->axis[d].get()] = Range(an.simplify(lo), ext);
            continue;
          }
        }
        lo = lo.defined() && lo.type() == dom.min.type() ? an.simplify(ir::max(lo, dom.min)) : dom.min;
        hi = hi.defined() && hi.type() == dom_hi.type() ? an.simplify(ir::min(hi, dom_hi)) : dom_hi;
        r = Range(lo, an.simplify(hi - lo + 1));
      }
      bounds[c->axis[d].get()] = r;
    }
    for (const auto &iv : c->reduce_axis) bounds[iv.get()] = iv->dom;
    pass_down_domain(s, &bounds);
    for (const auto &iv : s.leaf_iter_vars) {
      const Range &r = bounds.at(iv.get());
      an.bind(iv->var, Range(an.simplify(r.min), an.simplify(r.extent)));
    }
  }
  return bounds;
}

}  // namespace kiln::lower
