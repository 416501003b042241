#pragma once
// IRVisitor walks the IR; IRMutator rebuilds it, returning the same node when nothing below it
// changed so that untouched subtrees stay shared.
#include <functional>

#include "compiler/ir/ir.h"

namespace kiln::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit_expr(const Expr &e);
  virtual void visit_stmt(const Stmt &s);

#define KILN_VISIT_DECL(n) virtual void visit(const n##Node *op);
  KILN_EXPR_NODES(KILN_VISIT_DECL)
  KILN_STMT_NODES(KILN_VISIT_DECL)
#undef KILN_VISIT_DECL

 protected:
  void visit_range(const Range &r);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr &e);
  virtual Stmt mutate(const Stmt &s);

 protected:
  // `self` is the handle of `op`, to be returned when nothing changed.
#define KILN_MUTATE_EXPR_DECL(n) virtual Expr visit(const n##Node *op, const Expr &self);
  KILN_EXPR_NODES(KILN_MUTATE_EXPR_DECL)
#undef KILN_MUTATE_EXPR_DECL
#define KILN_MUTATE_STMT_DECL(n) virtual Stmt visit(const n##Node *op, const Stmt &self);
  KILN_STMT_NODES(KILN_MUTATE_STMT_DECL)
#undef KILN_MUTATE_STMT_DECL

  Range mutate_range(const Range &r);
  // Returns true and fills `out` when any element changed.
  bool mutate_exprs(const std::vector<Expr> &in, std::vector<Expr> *out);
};

// Calls f on every expression and statement node, children first (post-order).
void post_order_visit(const Stmt &s, const std::function<void(const IRNode *)> &f);
void post_order_visit(const Expr &e, const std::function<void(const IRNode *)> &f);

// Rewrites nodes bottom-up: f receives each rebuilt expression and returns its replacement
// (or an undefined Expr to keep it).
Expr ir_transform(const Expr &e, const std::function<Expr(const Expr &)> &f);
Stmt ir_transform(const Stmt &s, const std::function<Expr(const Expr &)> &f);

}  // namespace kiln::ir
