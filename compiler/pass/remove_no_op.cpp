#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

// Calls other than pure intrinsics may have effects (barriers, extern functions).
bool has_side_effect(const Expr &e) {
  bool found = false;
  post_order_visit(e, [&](const IRNode *n) {
    found = found ||
            (n->node_type == NodeType::Call && static_cast<const CallNode *>(n)->kind != CallNode::Kind::PureIntrinsic);
  });
  return found;
}

bool uses_var(const Stmt &s, const VariableNode *v) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) { found = found || n == v; });
  return found;
}

// Whether anything may read buffer `buf`: a load, or its variable used as a value or named by
// an attribute.
bool may_read(const Stmt &s, const VariableNode *buf) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (n == buf) found = true;
    if (n->node_type == NodeType::Load && static_cast<const LoadNode *>(n)->buffer_var.get() == buf) found = true;
    if (n->node_type == NodeType::AttrStmt && static_cast<const AttrStmtNode *>(n)->node.get() == buf) found = true;
  });
  return found;
}

// Removes the stores into a buffer nobody reads, keeping the effects of their values.
class DropStores : public IRMutator {
 public:
  explicit DropStores(const VariableNode *buf) : buf_(buf) {}

 protected:
  using IRMutator::visit;
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    if (op->buffer_var.get() != buf_) return self;
    return has_side_effect(op->value) ? EvaluateNode::make(op->value) : make_nop();
  }

 private:
  const VariableNode *buf_;
};

class NoOpRemover : public IRMutator {
 protected:
  using IRMutator::visit;

  Stmt visit(const ForNode *op, const Stmt &self) override {
    auto extent = as_const_int(op->extent);
    if (extent && *extent <= 0) return make_nop();
    Stmt body = mutate(op->body);
    if (is_nop(body)) return make_nop();
    if (body.same_as(op->body)) return self;
    return ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
  }

  Stmt visit(const IfThenElseNode *op, const Stmt &self) override {
    if (auto c = as_const_int(op->condition)) {
      if (*c) return mutate(op->then_case);
      return op->else_case.defined() ? mutate(op->else_case) : make_nop();
    }
    Stmt then_case = mutate(op->then_case);
    Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : op->else_case;
    if (is_nop(then_case) && is_nop(else_case) && !has_side_effect(op->condition)) return make_nop();
    if (else_case.defined() && is_nop(else_case)) else_case = Stmt();
    if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) return self;
    return IfThenElseNode::make(op->condition, then_case, else_case);
  }

  Stmt visit(const BlockNode *op, const Stmt &self) override {
    std::vector<Stmt> stmts;
    bool changed = false;
    for (const auto &s : op->stmts) {
      stmts.push_back(mutate(s));
      changed = changed || !stmts.back().same_as(s) || is_nop(stmts.back());
    }
    if (!changed && stmts.size() > 1) return self;
    return BlockNode::make(std::move(stmts));
  }

  Stmt visit(const LetStmtNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    if (!uses_var(body, op->var.get()) && !has_side_effect(op->value)) return body;
    if (body.same_as(op->body)) return self;
    return LetStmtNode::make(op->var, op->value, body);
  }

  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    if (is_nop(body)) return body;
    if (body.same_as(op->body)) return self;
    return AttrStmtNode::make(op->node, op->key, op->value, body);
  }

  Stmt visit(const EvaluateNode *op, const Stmt &self) override {
    if (is_nop(self)) return self;
    return has_side_effect(op->value) ? self : make_nop();
  }

  Stmt visit(const AllocateNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    if (is_nop(body)) return body;
    if (!may_read(body, op->buffer_var.get())) return mutate(DropStores(op->buffer_var.get()).mutate(body));
    if (body.same_as(op->body)) return self;
    return AllocateNode::make(op->buffer_var, op->dtype, op->extents, op->scope, body);
  }
};

}  // namespace

Stmt remove_no_op(const Stmt &s) { return NoOpRemover().mutate(s); }

}  // namespace kiln::pass
