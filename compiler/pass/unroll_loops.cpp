#include <algorithm>
#include <limits>
#include <unordered_map>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

constexpr int64_t kManySteps = int64_t{1} << 40;

// How many copies of the innermost statements unrolling s completely would make: the product of
// the constant extents of nested loops (kManySteps when one is not constant).
int64_t step_count(const Stmt &s) {
  if (const auto *f = s.as<ForNode>()) {
    auto extent = as_const_int(f->extent);
    if (!extent) return kManySteps;
    return std::min(kManySteps, std::max<int64_t>(*extent, 0) * step_count(f->body));
  }
  if (const auto *b = s.as<BlockNode>()) {
    int64_t n = 1;
    for (const auto &c : b->stmts) n = std::max(n, step_count(c));
    return n;
  }
  if (const auto *i = s.as<IfThenElseNode>()) {
    return std::max(step_count(i->then_case), i->else_case.defined() ? step_count(i->else_case) : 1);
  }
  if (const auto *l = s.as<LetStmtNode>()) return step_count(l->body);
  if (const auto *a = s.as<AttrStmtNode>()) return step_count(a->body);
  if (const auto *a = s.as<AllocateNode>()) return step_count(a->body);
  if (const auto *a = s.as<AssertStmtNode>()) return step_count(a->body);
  return 1;
}

class LoopUnroller : public IRMutator {
 protected:
  using IRMutator::visit;

  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    if (op->key != attr::kAutoUnrollMaxStep) return IRMutator::visit(op, self);
    int64_t saved = auto_max_step_;
    auto_max_step_ = as_const_int(op->value).value_or(0);
    Stmt body = mutate(op->body);
    auto_max_step_ = saved;
    return body;
  }

  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    auto extent = as_const_int(op->extent);
    bool unroll = extent && op->kind == ForKind::Unrolled;
    if (extent && op->kind == ForKind::Serial && auto_max_step_ > 0) {
      unroll = step_count(self) <= auto_max_step_;
    }
    if (unroll) return unrolled(op, body, *extent);
    ForKind kind = op->kind == ForKind::Unrolled ? ForKind::Serial : op->kind;
    if (kind == op->kind && body.same_as(op->body)) return self;
    return ForNode::make(op->loop_var, op->min, op->extent, kind, body, op->thread_tag);
  }

 private:
  static Stmt unrolled(const ForNode *op, const Stmt &body, int64_t extent) {
    std::vector<Stmt> copies;
    auto min = as_const_int(op->min);
    for (int64_t i = 0; i < extent; ++i) {
      Expr value = min ? make_const(op->loop_var.type(), *min + i)
                       : (i == 0 ? op->min : op->min + make_const(op->min.type(), i));
      value = cast(op->loop_var.type(), value);
      VarMap m{{op->loop_var.get(), value}};
      copies.push_back(i > 0 ? copy_with_fresh_vars(body, m) : substitute(body, m));
    }
    return BlockNode::make(std::move(copies));
  }

  int64_t auto_max_step_ = 0;
};

}  // namespace

Stmt unroll_loops(const Stmt &s) { return LoopUnroller().mutate(s); }

}  // namespace kiln::pass
