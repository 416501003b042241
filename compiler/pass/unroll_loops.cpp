#include <algorithm>
#include <limits>
#include <unordered_map>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

// Substitutes expressions for variables in a statement. With `fresh`, every variable defined
// inside it (loop, let, buffer) gets a new node, so that the copy can sit next to the original.
class Substitute : public IRMutator {
 public:
  Substitute(std::unordered_map<const VariableNode *, Expr> vmap, bool fresh) : vmap_(std::move(vmap)), fresh_(fresh) {}

  Stmt run(const Stmt &s) {
    if (fresh_) {
      post_order_visit(s, [&](const IRNode *n) {
        if (n->node_type == NodeType::For) rename(static_cast<const ForNode *>(n)->loop_var);
        if (n->node_type == NodeType::LetStmt) rename(static_cast<const LetStmtNode *>(n)->var);
        if (n->node_type == NodeType::Let) rename(static_cast<const LetNode *>(n)->var);
        if (n->node_type == NodeType::Allocate) rename(static_cast<const AllocateNode *>(n)->buffer_var);
      });
    }
    return mutate(s);
  }

 protected:
  using IRMutator::visit;
  Expr visit(const VariableNode *op, const Expr &self) override {
    auto it = vmap_.find(op);
    return it == vmap_.end() ? self : it->second;
  }
  Expr visit(const LetNode *op, const Expr &self) override {
    Var v = def(op->var);
    Expr value = mutate(op->value), body = mutate(op->body);
    if (v.same_as(op->var) && value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetNode::make(v, value, body);
  }
  Expr visit(const LoadNode *op, const Expr &self) override {
    Var buf = def(op->buffer_var);
    Expr index = mutate(op->index), pred = mutate(op->predicate);
    if (buf.same_as(op->buffer_var) && index.same_as(op->index) && pred.same_as(op->predicate)) return self;
    return LoadNode::make(op->type, buf, index, pred);
  }
  Stmt visit(const LetStmtNode *op, const Stmt &self) override {
    Var v = def(op->var);
    Expr value = mutate(op->value);
    Stmt body = mutate(op->body);
    if (v.same_as(op->var) && value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetStmtNode::make(v, value, body);
  }
  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    Expr node = mutate(op->node), value = mutate(op->value);
    Stmt body = mutate(op->body);
    if (node.same_as(op->node) && value.same_as(op->value) && body.same_as(op->body)) return self;
    return AttrStmtNode::make(node, op->key, value, body);
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Var buf = def(op->buffer_var);
    Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
    if (buf.same_as(op->buffer_var) && value.same_as(op->value) && index.same_as(op->index) &&
        pred.same_as(op->predicate)) {
      return self;
    }
    return StoreNode::make(buf, value, index, pred);
  }
  Stmt visit(const AllocateNode *op, const Stmt &self) override {
    Var buf = def(op->buffer_var);
    std::vector<Expr> extents;
    bool changed = mutate_exprs(op->extents, &extents);
    Stmt body = mutate(op->body);
    if (!changed && buf.same_as(op->buffer_var) && body.same_as(op->body)) return self;
    return AllocateNode::make(buf, op->dtype, std::move(extents), op->scope, body);
  }
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Var v = def(op->loop_var);
    Expr min = mutate(op->min), extent = mutate(op->extent);
    Stmt body = mutate(op->body);
    if (v.same_as(op->loop_var) && min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) {
      return self;
    }
    return ForNode::make(v, min, extent, op->kind, body, op->thread_tag);
  }

 private:
  void rename(const Var &v) {
    Var n(v.name(), v.type());
    const_cast<VariableNode *>(n.get())->pointee = v->pointee;
    vmap_[v.get()] = n;
  }
  // The variable a definition site or buffer reference uses after renaming.
  Var def(const Var &v) const {
    auto it = vmap_.find(v.get());
    return it != vmap_.end() && it->second.as<VariableNode>() ? Var(it->second) : v;
  }

  std::unordered_map<const VariableNode *, Expr> vmap_;
  bool fresh_;
};

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
      copies.push_back(Substitute({{op->loop_var.get(), value}}, i > 0).run(body));
    }
    return BlockNode::make(std::move(copies));
  }

  int64_t auto_max_step_ = 0;
};

}  // namespace

Stmt unroll_loops(const Stmt &s) { return LoopUnroller().mutate(s); }

}  // namespace kiln::pass
