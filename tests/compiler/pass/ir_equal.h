#pragma once
// Structural equality of IR for pass tests. Variables defined inside the compared statements (loop,
// let and allocated buffer variables) are matched by position, because passes create new ones;
// free variables must be the same node on both sides.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "compiler/ir/ir.h"
#include "compiler/ir/ir_printer.h"

namespace kiln::ir::testing {

class IREqual {
 public:
  bool operator()(const Stmt &a, const Stmt &b) { return stmt(a, b); }
  bool operator()(const Expr &a, const Expr &b) { return expr(a, b); }

 private:
  std::unordered_map<const VariableNode *, const VariableNode *> map_;

  bool define(const Var &a, const Var &b) {
    if (a.type() != b.type()) return false;
    map_[a.get()] = b.get();
    return true;
  }
  bool var(const Var &a, const Var &b) {
    auto it = map_.find(a.get());
    return it != map_.end() ? it->second == b.get() : a.get() == b.get();
  }
  bool exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!expr(a[i], b[i])) return false;
    }
    return true;
  }
  template <typename T>
  bool binary(const Expr &a, const Expr &b) {
    const T *x = a.as<T>(), *y = b.as<T>();
    return expr(x->a, y->a) && expr(x->b, y->b);
  }

  bool expr(const Expr &a, const Expr &b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type || a.type() != b.type()) return false;
    switch (a->node_type) {
      case NodeType::IntImm: return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
      case NodeType::FloatImm: return a.as<FloatImmNode>()->value == b.as<FloatImmNode>()->value;
      case NodeType::StringImm: return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
      case NodeType::Variable: return var(Var(a), Var(b));
      case NodeType::Cast: return expr(a.as<CastNode>()->value, b.as<CastNode>()->value);
      case NodeType::Add: return binary<AddNode>(a, b);
      case NodeType::Sub: return binary<SubNode>(a, b);
      case NodeType::Mul: return binary<MulNode>(a, b);
      case NodeType::Div: return binary<DivNode>(a, b);
      case NodeType::Mod: return binary<ModNode>(a, b);
      case NodeType::FloorDiv: return binary<FloorDivNode>(a, b);
      case NodeType::FloorMod: return binary<FloorModNode>(a, b);
      case NodeType::Min: return binary<MinNode>(a, b);
      case NodeType::Max: return binary<MaxNode>(a, b);
      case NodeType::EQ: return binary<EQNode>(a, b);
      case NodeType::NE: return binary<NENode>(a, b);
      case NodeType::LT: return binary<LTNode>(a, b);
      case NodeType::LE: return binary<LENode>(a, b);
      case NodeType::GT: return binary<GTNode>(a, b);
      case NodeType::GE: return binary<GENode>(a, b);
      case NodeType::And: return binary<AndNode>(a, b);
      case NodeType::Or: return binary<OrNode>(a, b);
      case NodeType::Not: return expr(a.as<NotNode>()->a, b.as<NotNode>()->a);
      case NodeType::Select: {
        const auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
        return expr(x->condition, y->condition) && expr(x->true_value, y->true_value) &&
               expr(x->false_value, y->false_value);
      }
      case NodeType::Ramp: {
        const auto *x = a.as<RampNode>(), *y = b.as<RampNode>();
        return x->lanes == y->lanes && expr(x->base, y->base) && expr(x->stride, y->stride);
      }
      case NodeType::Broadcast: {
        const auto *x = a.as<BroadcastNode>(), *y = b.as<BroadcastNode>();
        return x->lanes == y->lanes && expr(x->value, y->value);
      }
      case NodeType::Let: {
        const auto *x = a.as<LetNode>(), *y = b.as<LetNode>();
        return expr(x->value, y->value) && define(x->var, y->var) && expr(x->body, y->body);
      }
      case NodeType::Call: {
        const auto *x = a.as<CallNode>(), *y = b.as<CallNode>();
        return x->name == y->name && x->kind == y->kind && exprs(x->args, y->args);
      }
      case NodeType::Load: {
        const auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
        return var(x->buffer_var, y->buffer_var) && expr(x->index, y->index) && expr(x->predicate, y->predicate);
      }
      default: return a.same_as(b);
    }
  }

  bool stmt(const Stmt &a, const Stmt &b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type) return false;
    switch (a->node_type) {
      case NodeType::LetStmt: {
        const auto *x = a.as<LetStmtNode>(), *y = b.as<LetStmtNode>();
        return expr(x->value, y->value) && define(x->var, y->var) && stmt(x->body, y->body);
      }
      case NodeType::AttrStmt: {
        const auto *x = a.as<AttrStmtNode>(), *y = b.as<AttrStmtNode>();
        return x->key == y->key && expr(x->node, y->node) && expr(x->value, y->value) && stmt(x->body, y->body);
      }
      case NodeType::AssertStmt: {
        const auto *x = a.as<AssertStmtNode>(), *y = b.as<AssertStmtNode>();
        return x->message == y->message && expr(x->condition, y->condition) && stmt(x->body, y->body);
      }
      case NodeType::Store: {
        const auto *x = a.as<StoreNode>(), *y = b.as<StoreNode>();
        return var(x->buffer_var, y->buffer_var) && expr(x->value, y->value) && expr(x->index, y->index) &&
               expr(x->predicate, y->predicate);
      }
      case NodeType::Allocate: {
        const auto *x = a.as<AllocateNode>(), *y = b.as<AllocateNode>();
        return x->dtype == y->dtype && x->scope == y->scope && exprs(x->extents, y->extents) &&
               define(x->buffer_var, y->buffer_var) && stmt(x->body, y->body);
      }
      case NodeType::For: {
        const auto *x = a.as<ForNode>(), *y = b.as<ForNode>();
        return x->kind == y->kind && x->thread_tag == y->thread_tag && expr(x->min, y->min) &&
               expr(x->extent, y->extent) && define(x->loop_var, y->loop_var) && stmt(x->body, y->body);
      }
      case NodeType::IfThenElse: {
        const auto *x = a.as<IfThenElseNode>(), *y = b.as<IfThenElseNode>();
        return expr(x->condition, y->condition) && stmt(x->then_case, y->then_case) &&
               stmt(x->else_case, y->else_case);
      }
      case NodeType::Block: {
        const auto *x = a.as<BlockNode>(), *y = b.as<BlockNode>();
        if (x->stmts.size() != y->stmts.size()) return false;
        for (size_t i = 0; i < x->stmts.size(); ++i) {
          if (!stmt(x->stmts[i], y->stmts[i])) return false;
        }
        return true;
      }
      case NodeType::Evaluate: return expr(a.as<EvaluateNode>()->value, b.as<EvaluateNode>()->value);
      default: return a.same_as(b);
    }
  }
};

// For EXPECT_TRUE(ir_equal(actual, expected)): prints both sides when they differ.
template <typename T>
::testing::AssertionResult ir_equal(const T &actual, const T &expected) {
  if (IREqual()(actual, expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "IR differs.\n--- actual:\n"
                                       << to_string(actual) << "\n--- expected:\n"
                                       << to_string(expected);
}

}  // namespace kiln::ir::testing
