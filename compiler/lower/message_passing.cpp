#include "compiler/lower/message_passing.h"

#include "compiler/arith/analyzer.h"
#include "compiler/ir/op.h"

namespace kiln::lower {

using namespace ir;

namespace {

const Range &range_of(const BoundMap &b, const IterVar &iv, const te::StageNode &stage) {
  auto it = b.find(iv.get());
  if (it == b.end()) {
    throw InternalError("in stage " + stage.op->name + ": no range for axis " + iv->var.name());
  }
  return it->second;
}

Expr ceil_div(const Expr &a, const Expr &b) { return arith::simplify(floordiv(a + b - make_one(a.type()), b)); }

}  // namespace

void pass_down_domain(const te::StageNode &stage, BoundMap *bounds) {
  for (const auto &rel : stage.relations) {
    if (rel.kind == te::IterVarRelation::Kind::Split) {
      const auto &s = rel.split;
      Range p = range_of(*bounds, s.parent, stage);
      if (s.factor.defined()) {
        (*bounds)[s.outer.get()] = Range(0, ceil_div(p.extent, s.factor));
        (*bounds)[s.inner.get()] = Range(0, s.factor);
      } else {
        (*bounds)[s.outer.get()] = Range(0, s.nparts);
        (*bounds)[s.inner.get()] = Range(0, ceil_div(p.extent, s.nparts));
      }
    } else if (rel.kind == te::IterVarRelation::Kind::Fuse) {
      const auto &f = rel.fuse;
      Range o = range_of(*bounds, f.outer, stage), i = range_of(*bounds, f.inner, stage);
      (*bounds)[f.fused.get()] = Range(0, arith::simplify(o.extent * i.extent));
    } else {
      Range p = range_of(*bounds, rel.rebase.parent, stage);
      (*bounds)[rel.rebase.rebased.get()] = Range(0, p.extent);
    }
  }
}

void pass_up_index(const te::StageNode &stage, const BoundMap &bounds, IndexMap *values) {
  for (auto it = stage.relations.rbegin(); it != stage.relations.rend(); ++it) {
    const auto &rel = *it;
    if (rel.kind == te::IterVarRelation::Kind::Split) {
      const auto &s = rel.split;
      Expr o = values->at(s.outer.get()), i = values->at(s.inner.get());
      Expr inner_ext = range_of(bounds, s.inner, stage).extent;
      Expr v = is_zero(o) ? i : o * inner_ext + i;
      Expr mn = range_of(bounds, s.parent, stage).min;
      if (!is_zero(mn)) v = v + mn;
      (*values)[s.parent.get()] = v;
    } else if (rel.kind == te::IterVarRelation::Kind::Fuse) {
      const auto &f = rel.fuse;
      Expr v = values->at(f.fused.get());
      Range ro = range_of(bounds, f.outer, stage), ri = range_of(bounds, f.inner, stage);
      Expr ov = is_one(ri.extent) ? v : floordiv(v, ri.extent);
      Expr iv = is_one(ri.extent) ? make_zero(v.type()) : floormod(v, ri.extent);
      if (!is_zero(ro.min)) ov = ov + ro.min;
      if (!is_zero(ri.min)) iv = iv + ri.min;
      (*values)[f.outer.get()] = ov;
      (*values)[f.inner.get()] = iv;
    } else {
      Expr v = values->at(rel.rebase.rebased.get());
      Expr mn = range_of(bounds, rel.rebase.parent, stage).min;
      (*values)[rel.rebase.parent.get()] = is_zero(mn) ? v : v + mn;
    }
  }
}

std::vector<Expr> split_predicates(const te::StageNode &stage, const BoundMap &bounds, const IndexMap &values,
                                   bool reduce) {
  std::vector<Expr> preds;
  arith::Analyzer an;
  for (const auto &rel : stage.relations) {
    if (rel.kind != te::IterVarRelation::Kind::Split) continue;
    const auto &s = rel.split;
    if ((s.parent->iter_type == IterVarType::CommReduce) != reduce) continue;
    Range p = range_of(bounds, s.parent, stage);
    Expr inner_ext = range_of(bounds, s.inner, stage).extent;
    Expr outer_ext = range_of(bounds, s.outer, stage).extent;
    // Exact when outer_ext * inner_ext == parent extent.
    if (an.can_prove_equal(outer_ext * inner_ext, p.extent)) continue;
    Expr v = values.at(s.parent.get());
    preds.push_back(arith::simplify(v < p.min + p.extent));
  }
  return preds;
}

}  // namespace kiln::lower
