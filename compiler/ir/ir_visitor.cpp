#include "compiler/ir/ir_visitor.h"

namespace kiln::ir {

// ---------------------------------------------------------------------------------------------
// IRVisitor

void IRVisitor::visit_expr(const Expr &e) {
  if (!e.defined()) return;
  switch (e->node_type) {
#define KILN_DISPATCH(n)                          \
  case NodeType::n:                               \
    visit(static_cast<const n##Node *>(e.get())); \
    break;
    KILN_EXPR_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
#define KILN_OTHER(n) case NodeType::n:
    KILN_STMT_NODES(KILN_OTHER)
#undef KILN_OTHER
    KILN_CHECK(false, "visit_expr on a statement node");
  }
}

void IRVisitor::visit_stmt(const Stmt &s) {
  if (!s.defined()) return;
  switch (s->node_type) {
#define KILN_DISPATCH(n)                          \
  case NodeType::n:                               \
    visit(static_cast<const n##Node *>(s.get())); \
    break;
    KILN_STMT_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
#define KILN_OTHER(n) case NodeType::n:
    KILN_EXPR_NODES(KILN_OTHER)
#undef KILN_OTHER
    KILN_CHECK(false, "visit_stmt on an expression node");
  }
}

void IRVisitor::visit_range(const Range &r) {
  visit_expr(r.min);
  visit_expr(r.extent);
}

void IRVisitor::visit(const IntImmNode *) {}
void IRVisitor::visit(const FloatImmNode *) {}
void IRVisitor::visit(const StringImmNode *) {}
void IRVisitor::visit(const VariableNode *) {}
void IRVisitor::visit(const CastNode *op) { visit_expr(op->value); }
#define KILN_BINARY_VISIT(n)                 \
  void IRVisitor::visit(const n##Node *op) { \
    visit_expr(op->a);                       \
    visit_expr(op->b);                       \
  }
KILN_BINARY_NODES(KILN_BINARY_VISIT)
#undef KILN_BINARY_VISIT
void IRVisitor::visit(const NotNode *op) { visit_expr(op->a); }
void IRVisitor::visit(const SelectNode *op) {
  visit_expr(op->condition);
  visit_expr(op->true_value);
  visit_expr(op->false_value);
}
void IRVisitor::visit(const RampNode *op) {
  visit_expr(op->base);
  visit_expr(op->stride);
}
void IRVisitor::visit(const BroadcastNode *op) { visit_expr(op->value); }
void IRVisitor::visit(const LetNode *op) {
  visit_expr(op->value);
  visit_expr(op->body);
}
void IRVisitor::visit(const CallNode *op) {
  for (const auto &a : op->args) visit_expr(a);
}
void IRVisitor::visit(const LoadNode *op) {
  visit_expr(op->index);
  visit_expr(op->predicate);
}
void IRVisitor::visit(const ProducerLoadNode *op) {
  for (const auto &i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const ReduceNode *op) {
  for (const auto &iv : op->axis) visit_range(iv->dom);
  for (const auto &s : op->source) visit_expr(s);
  visit_expr(op->condition);
}

void IRVisitor::visit(const LetStmtNode *op) {
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AttrStmtNode *op) {
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AssertStmtNode *op) {
  visit_expr(op->condition);
  visit_stmt(op->body);
}
void IRVisitor::visit(const StoreNode *op) {
  visit_expr(op->value);
  visit_expr(op->index);
  visit_expr(op->predicate);
}
void IRVisitor::visit(const ProducerStoreNode *op) {
  visit_expr(op->value);
  for (const auto &i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const AllocateNode *op) {
  for (const auto &e : op->extents) visit_expr(e);
  visit_stmt(op->body);
}
void IRVisitor::visit(const ForNode *op) {
  visit_expr(op->min);
  visit_expr(op->extent);
  visit_stmt(op->body);
}
void IRVisitor::visit(const IfThenElseNode *op) {
  visit_expr(op->condition);
  visit_stmt(op->then_case);
  visit_stmt(op->else_case);
}
void IRVisitor::visit(const BlockNode *op) {
  for (const auto &s : op->stmts) visit_stmt(s);
}
void IRVisitor::visit(const EvaluateNode *op) { visit_expr(op->value); }
void IRVisitor::visit(const ProducerRealizeNode *op) {
  for (const auto &r : op->bounds) visit_range(r);
  visit_stmt(op->body);
}

// ---------------------------------------------------------------------------------------------
// IRMutator

Expr IRMutator::mutate(const Expr &e) {
  if (!e.defined()) return e;
  switch (e->node_type) {
#define KILN_DISPATCH(n) \
  case NodeType::n:      \
    return visit(static_cast<const n##Node *>(e.get()), e);
    KILN_EXPR_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
#define KILN_OTHER(n) case NodeType::n:
    KILN_STMT_NODES(KILN_OTHER)
#undef KILN_OTHER
    KILN_CHECK(false, "mutate(Expr) on a statement node");
  }
  return e;
}

Stmt IRMutator::mutate(const Stmt &s) {
  if (!s.defined()) return s;
  switch (s->node_type) {
#define KILN_DISPATCH(n) \
  case NodeType::n:      \
    return visit(static_cast<const n##Node *>(s.get()), s);
    KILN_STMT_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
#define KILN_OTHER(n) case NodeType::n:
    KILN_EXPR_NODES(KILN_OTHER)
#undef KILN_OTHER
    KILN_CHECK(false, "mutate(Stmt) on an expression node");
  }
  return s;
}

Range IRMutator::mutate_range(const Range &r) {
  Expr mn = mutate(r.min), ex = mutate(r.extent);
  if (mn.same_as(r.min) && ex.same_as(r.extent)) return r;
  return Range(mn, ex);
}

bool IRMutator::mutate_exprs(const std::vector<Expr> &in, std::vector<Expr> *out) {
  bool changed = false;
  out->clear();
  out->reserve(in.size());
  for (const auto &e : in) {
    out->push_back(mutate(e));
    changed = changed || !out->back().same_as(e);
  }
  return changed;
}

Expr IRMutator::visit(const IntImmNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const FloatImmNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const StringImmNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const VariableNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const CastNode *op, const Expr &self) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return self;
  return CastNode::make(op->type, v);
}
#define KILN_BINARY_MUTATE(n)                                  \
  Expr IRMutator::visit(const n##Node *op, const Expr &self) { \
    Expr a = mutate(op->a), b = mutate(op->b);                 \
    if (a.same_as(op->a) && b.same_as(op->b)) return self;     \
    return n##Node::make(a, b);                                \
  }
KILN_BINARY_NODES(KILN_BINARY_MUTATE)
#undef KILN_BINARY_MUTATE
Expr IRMutator::visit(const NotNode *op, const Expr &self) {
  Expr a = mutate(op->a);
  if (a.same_as(op->a)) return self;
  return NotNode::make(a);
}
Expr IRMutator::visit(const SelectNode *op, const Expr &self) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return SelectNode::make(c, t, f);
}
Expr IRMutator::visit(const RampNode *op, const Expr &self) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return self;
  return RampNode::make(b, s, op->lanes);
}
Expr IRMutator::visit(const BroadcastNode *op, const Expr &self) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return self;
  return BroadcastNode::make(v, op->lanes);
}
Expr IRMutator::visit(const LetNode *op, const Expr &self) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return LetNode::make(op->var, v, b);
}
Expr IRMutator::visit(const CallNode *op, const Expr &self) {
  std::vector<Expr> args;
  if (!mutate_exprs(op->args, &args)) return self;
  return CallNode::make(op->type, op->name, std::move(args), op->kind);
}
Expr IRMutator::visit(const LoadNode *op, const Expr &self) {
  Expr i = mutate(op->index), p = mutate(op->predicate);
  if (i.same_as(op->index) && p.same_as(op->predicate)) return self;
  return LoadNode::make(op->type.with_lanes(i.type().lanes()), op->buffer_var, i, p);
}
Expr IRMutator::visit(const ProducerLoadNode *op, const Expr &self) {
  std::vector<Expr> idx;
  if (!mutate_exprs(op->indices, &idx)) return self;
  return ProducerLoadNode::make(op->producer, op->value_index, std::move(idx));
}
Expr IRMutator::visit(const ReduceNode *op, const Expr &self) {
  std::vector<Expr> src;
  bool changed = mutate_exprs(op->source, &src);
  Expr c = mutate(op->condition);
  if (!changed && c.same_as(op->condition)) return self;
  return ReduceNode::make(op->combiner, std::move(src), op->axis, c, op->value_index);
}

Stmt IRMutator::visit(const LetStmtNode *op, const Stmt &self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return LetStmtNode::make(op->var, v, b);
}
Stmt IRMutator::visit(const AttrStmtNode *op, const Stmt &self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return AttrStmtNode::make(op->node, op->key, v, b);
}
Stmt IRMutator::visit(const AssertStmtNode *op, const Stmt &self) {
  Expr c = mutate(op->condition);
  Stmt b = mutate(op->body);
  if (c.same_as(op->condition) && b.same_as(op->body)) return self;
  return AssertStmtNode::make(c, op->message, b);
}
Stmt IRMutator::visit(const StoreNode *op, const Stmt &self) {
  Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
  if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return self;
  return StoreNode::make(op->buffer_var, v, i, p);
}
Stmt IRMutator::visit(const ProducerStoreNode *op, const Stmt &self) {
  Expr v = mutate(op->value);
  std::vector<Expr> idx;
  bool changed = mutate_exprs(op->indices, &idx);
  if (!changed && v.same_as(op->value)) return self;
  return ProducerStoreNode::make(op->producer, op->value_index, v, std::move(idx));
}
Stmt IRMutator::visit(const AllocateNode *op, const Stmt &self) {
  std::vector<Expr> ext;
  bool changed = mutate_exprs(op->extents, &ext);
  Stmt b = mutate(op->body);
  if (!changed && b.same_as(op->body)) return self;
  return AllocateNode::make(op->buffer_var, op->dtype, std::move(ext), op->scope, b);
}
Stmt IRMutator::visit(const ForNode *op, const Stmt &self) {
  Expr mn = mutate(op->min), ex = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (mn.same_as(op->min) && ex.same_as(op->extent) && b.same_as(op->body)) return self;
  return ForNode::make(op->loop_var, mn, ex, op->kind, b, op->thread_tag);
}
Stmt IRMutator::visit(const IfThenElseNode *op, const Stmt &self) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return IfThenElseNode::make(c, t, e);
}
Stmt IRMutator::visit(const BlockNode *op, const Stmt &self) {
  std::vector<Stmt> out;
  bool changed = false;
  for (const auto &s : op->stmts) {
    out.push_back(mutate(s));
    changed = changed || !out.back().same_as(s);
  }
  if (!changed) return self;
  return BlockNode::make(std::move(out));
}
Stmt IRMutator::visit(const EvaluateNode *op, const Stmt &self) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return self;
  return EvaluateNode::make(v);
}
Stmt IRMutator::visit(const ProducerRealizeNode *op, const Stmt &self) {
  std::vector<Range> bounds;
  bool changed = false;
  for (const auto &r : op->bounds) {
    bounds.push_back(mutate_range(r));
    changed = changed || !bounds.back().min.same_as(r.min) || !bounds.back().extent.same_as(r.extent);
  }
  Stmt b = mutate(op->body);
  if (!changed && b.same_as(op->body)) return self;
  return ProducerRealizeNode::make(op->producer, op->value_index, std::move(bounds), op->scope, b);
}

// ---------------------------------------------------------------------------------------------

namespace {

class PostOrderVisitor : public IRVisitor {
 public:
  explicit PostOrderVisitor(const std::function<void(const IRNode *)> &f) : f_(f) {}
  void visit_expr(const Expr &e) override {
    if (!e.defined()) return;
    IRVisitor::visit_expr(e);
    f_(e.get());
  }
  void visit_stmt(const Stmt &s) override {
    if (!s.defined()) return;
    IRVisitor::visit_stmt(s);
    f_(s.get());
  }

 private:
  const std::function<void(const IRNode *)> &f_;
};

class Transformer : public IRMutator {
 public:
  explicit Transformer(const std::function<Expr(const Expr &)> &f) : f_(f) {}
  using IRMutator::mutate;
  Expr mutate(const Expr &e) override {
    Expr r = IRMutator::mutate(e);
    if (!r.defined()) return r;
    Expr n = f_(r);
    return n.defined() ? n : r;
  }

 private:
  const std::function<Expr(const Expr &)> &f_;
};

}  // namespace

void post_order_visit(const Stmt &s, const std::function<void(const IRNode *)> &f) {
  PostOrderVisitor v(f);
  v.visit_stmt(s);
}
void post_order_visit(const Expr &e, const std::function<void(const IRNode *)> &f) {
  PostOrderVisitor v(f);
  v.visit_expr(e);
}

Expr ir_transform(const Expr &e, const std::function<Expr(const Expr &)> &f) { return Transformer(f).mutate(e); }
Stmt ir_transform(const Stmt &s, const std::function<Expr(const Expr &)> &f) { return Transformer(f).mutate(s); }

}  // namespace kiln::ir
