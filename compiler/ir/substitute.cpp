#include "compiler/ir/substitute.h"

#include "compiler/ir/ir_visitor.h"

namespace kiln::ir {

namespace {

// Substitutes expressions for variables in a statement. With `fresh`, every variable defined
// inside it (loop, let, buffer) gets a new node, so that the copy can sit next to the original.
class Substituter : public IRMutator {
 public:
  Substituter(std::unordered_map<const VariableNode *, Expr> vmap, bool fresh)
      : vmap_(std::move(vmap)), fresh_(fresh) {}

  using IRMutator::mutate;

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

}  // namespace

Expr substitute(const Expr &e, const VarMap &m) {
  if (m.empty()) return e;
  return Substituter(m, false).mutate(e);
}

Stmt substitute(const Stmt &s, const VarMap &m) {
  if (m.empty()) return s;
  return Substituter(m, false).run(s);
}

Stmt copy_with_fresh_vars(const Stmt &s, const VarMap &m) { return Substituter(m, true).run(s); }

}  // namespace kiln::ir
