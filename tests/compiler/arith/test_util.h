#pragma once
// Helpers for the arithmetic tests: a structural comparison of expressions and statements
// (variables by identity) and a small reference evaluator for integer expressions, both written
// independently of the simplifier.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "compiler/ir/ir.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"

namespace kiln::arith::testing {

using namespace ir;

inline bool same_expr(const Expr &a, const Expr &b);

inline bool same_exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_expr(a[i], b[i])) return false;
  }
  return true;
}

template <typename T>
bool same_binary(const Expr &a, const Expr &b) {
  return same_expr(a.as<T>()->a, b.as<T>()->a) && same_expr(a.as<T>()->b, b.as<T>()->b);
}

inline bool same_expr(const Expr &a, const Expr &b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a->node_type != b->node_type || a.type() != b.type()) return false;
  switch (a->node_type) {
    case NodeType::IntImm: return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case NodeType::FloatImm: return a.as<FloatImmNode>()->value == b.as<FloatImmNode>()->value;
    case NodeType::StringImm: return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
    case NodeType::Variable: return a.same_as(b);
    case NodeType::Cast: return same_expr(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case NodeType::Add: return same_binary<AddNode>(a, b);
    case NodeType::Sub: return same_binary<SubNode>(a, b);
    case NodeType::Mul: return same_binary<MulNode>(a, b);
    case NodeType::Div: return same_binary<DivNode>(a, b);
    case NodeType::Mod: return same_binary<ModNode>(a, b);
    case NodeType::FloorDiv: return same_binary<FloorDivNode>(a, b);
    case NodeType::FloorMod: return same_binary<FloorModNode>(a, b);
    case NodeType::Min: return same_binary<MinNode>(a, b);
    case NodeType::Max: return same_binary<MaxNode>(a, b);
    case NodeType::EQ: return same_binary<EQNode>(a, b);
    case NodeType::NE: return same_binary<NENode>(a, b);
    case NodeType::LT: return same_binary<LTNode>(a, b);
    case NodeType::LE: return same_binary<LENode>(a, b);
    case NodeType::GT: return same_binary<GTNode>(a, b);
    case NodeType::GE: return same_binary<GENode>(a, b);
    case NodeType::And: return same_binary<AndNode>(a, b);
    case NodeType::Or: return same_binary<OrNode>(a, b);
    case NodeType::Not: return same_expr(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case NodeType::Select: {
      const auto *x = a.as<SelectNode>();
      const auto *y = b.as<SelectNode>();
      return same_expr(x->condition, y->condition) && same_expr(x->true_value, y->true_value) &&
             same_expr(x->false_value, y->false_value);
    }
    case NodeType::Ramp: {
      const auto *x = a.as<RampNode>();
      const auto *y = b.as<RampNode>();
      return x->lanes == y->lanes && same_expr(x->base, y->base) && same_expr(x->stride, y->stride);
    }
    case NodeType::Broadcast: {
      const auto *x = a.as<BroadcastNode>();
      const auto *y = b.as<BroadcastNode>();
      return x->lanes == y->lanes && same_expr(x->value, y->value);
    }
    case NodeType::Let: {
      const auto *x = a.as<LetNode>();
      const auto *y = b.as<LetNode>();
      return x->var.same_as(y->var) && same_expr(x->value, y->value) && same_expr(x->body, y->body);
    }
    case NodeType::Call: {
      const auto *x = a.as<CallNode>();
      const auto *y = b.as<CallNode>();
      return x->name == y->name && x->kind == y->kind && same_exprs(x->args, y->args);
    }
    case NodeType::Load: {
      const auto *x = a.as<LoadNode>();
      const auto *y = b.as<LoadNode>();
      return x->buffer_var.same_as(y->buffer_var) && same_expr(x->index, y->index) &&
             same_expr(x->predicate, y->predicate);
    }
    default: return a.same_as(b);
  }
}

inline bool same_stmt(const Stmt &a, const Stmt &b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a->node_type != b->node_type) return false;
  switch (a->node_type) {
    case NodeType::LetStmt: {
      const auto *x = a.as<LetStmtNode>();
      const auto *y = b.as<LetStmtNode>();
      return x->var.same_as(y->var) && same_expr(x->value, y->value) && same_stmt(x->body, y->body);
    }
    case NodeType::AttrStmt: {
      const auto *x = a.as<AttrStmtNode>();
      const auto *y = b.as<AttrStmtNode>();
      return x->key == y->key && x->node.same_as(y->node) && same_expr(x->value, y->value) &&
             same_stmt(x->body, y->body);
    }
    case NodeType::AssertStmt: {
      const auto *x = a.as<AssertStmtNode>();
      const auto *y = b.as<AssertStmtNode>();
      return x->message == y->message && same_expr(x->condition, y->condition) && same_stmt(x->body, y->body);
    }
    case NodeType::Store: {
      const auto *x = a.as<StoreNode>();
      const auto *y = b.as<StoreNode>();
      return x->buffer_var.same_as(y->buffer_var) && same_expr(x->value, y->value) &&
             same_expr(x->index, y->index) && same_expr(x->predicate, y->predicate);
    }
    case NodeType::Allocate: {
      const auto *x = a.as<AllocateNode>();
      const auto *y = b.as<AllocateNode>();
      return x->buffer_var.same_as(y->buffer_var) && x->dtype == y->dtype && x->scope == y->scope &&
             same_exprs(x->extents, y->extents) && same_stmt(x->body, y->body);
    }
    case NodeType::For: {
      const auto *x = a.as<ForNode>();
      const auto *y = b.as<ForNode>();
      return x->loop_var.same_as(y->loop_var) && x->kind == y->kind && x->thread_tag == y->thread_tag &&
             same_expr(x->min, y->min) && same_expr(x->extent, y->extent) && same_stmt(x->body, y->body);
    }
    case NodeType::IfThenElse: {
      const auto *x = a.as<IfThenElseNode>();
      const auto *y = b.as<IfThenElseNode>();
      return same_expr(x->condition, y->condition) && same_stmt(x->then_case, y->then_case) &&
             same_stmt(x->else_case, y->else_case);
    }
    case NodeType::Block: {
      const auto *x = a.as<BlockNode>();
      const auto *y = b.as<BlockNode>();
      if (x->stmts.size() != y->stmts.size()) return false;
      for (size_t i = 0; i < x->stmts.size(); ++i) {
        if (!same_stmt(x->stmts[i], y->stmts[i])) return false;
      }
      return true;
    }
    case NodeType::Evaluate: return same_expr(a.as<EvaluateNode>()->value, b.as<EvaluateNode>()->value);
    default: return a.same_as(b);
  }
}

inline ::testing::AssertionResult expr_matches(const Expr &actual, const Expr &expected) {
  if (same_expr(actual, expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << to_string(actual) << " (" << actual.type().to_string()
                                       << "), expected " << to_string(expected) << " ("
                                       << expected.type().to_string() << ")";
}

inline ::testing::AssertionResult stmt_matches(const Stmt &actual, const Stmt &expected) {
  if (same_stmt(actual, expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got\n" << to_string(actual) << "expected\n" << to_string(expected);
}

// Values of variables by identity.
using Env = std::unordered_map<const VariableNode *, int64_t>;

// Reference semantics of scalar integer and boolean expressions, in exact arithmetic (the values
// used in the tests stay far from overflow). Returns nullopt on division by zero or an
// unsupported node.
inline std::optional<int64_t> eval(const Expr &e, Env &env) {
  auto binary = [&env](const Expr &a, const Expr &b, auto f) -> std::optional<int64_t> {
    auto x = eval(a, env), y = eval(b, env);
    if (!x || !y) return std::nullopt;
    return f(*x, *y);
  };
  auto floor_div = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  };
  switch (e->node_type) {
    case NodeType::IntImm: return e.as<IntImmNode>()->value;
    case NodeType::Variable: {
      auto it = env.find(e.as<VariableNode>());
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    case NodeType::Add: return binary(e.as<AddNode>()->a, e.as<AddNode>()->b, [](int64_t x, int64_t y) { return x + y; });
    case NodeType::Sub: return binary(e.as<SubNode>()->a, e.as<SubNode>()->b, [](int64_t x, int64_t y) { return x - y; });
    case NodeType::Mul: return binary(e.as<MulNode>()->a, e.as<MulNode>()->b, [](int64_t x, int64_t y) { return x * y; });
    case NodeType::Div: {
      auto x = eval(e.as<DivNode>()->a, env), y = eval(e.as<DivNode>()->b, env);
      if (!x || !y || *y == 0) return std::nullopt;
      return *x / *y;
    }
    case NodeType::Mod: {
      auto x = eval(e.as<ModNode>()->a, env), y = eval(e.as<ModNode>()->b, env);
      if (!x || !y || *y == 0) return std::nullopt;
      return *x % *y;
    }
    case NodeType::FloorDiv: {
      auto x = eval(e.as<FloorDivNode>()->a, env), y = eval(e.as<FloorDivNode>()->b, env);
      if (!x || !y || *y == 0) return std::nullopt;
      return floor_div(*x, *y);
    }
    case NodeType::FloorMod: {
      auto x = eval(e.as<FloorModNode>()->a, env), y = eval(e.as<FloorModNode>()->b, env);
      if (!x || !y || *y == 0) return std::nullopt;
      return *x - floor_div(*x, *y) * *y;
    }
    case NodeType::Min: return binary(e.as<MinNode>()->a, e.as<MinNode>()->b, [](int64_t x, int64_t y) { return x < y ? x : y; });
    case NodeType::Max: return binary(e.as<MaxNode>()->a, e.as<MaxNode>()->b, [](int64_t x, int64_t y) { return x < y ? y : x; });
    case NodeType::EQ: return binary(e.as<EQNode>()->a, e.as<EQNode>()->b, [](int64_t x, int64_t y) -> int64_t { return x == y; });
    case NodeType::NE: return binary(e.as<NENode>()->a, e.as<NENode>()->b, [](int64_t x, int64_t y) -> int64_t { return x != y; });
    case NodeType::LT: return binary(e.as<LTNode>()->a, e.as<LTNode>()->b, [](int64_t x, int64_t y) -> int64_t { return x < y; });
    case NodeType::LE: return binary(e.as<LENode>()->a, e.as<LENode>()->b, [](int64_t x, int64_t y) -> int64_t { return x <= y; });
    case NodeType::GT: return binary(e.as<GTNode>()->a, e.as<GTNode>()->b, [](int64_t x, int64_t y) -> int64_t { return x > y; });
    case NodeType::GE: return binary(e.as<GENode>()->a, e.as<GENode>()->b, [](int64_t x, int64_t y) -> int64_t { return x >= y; });
    case NodeType::And: return binary(e.as<AndNode>()->a, e.as<AndNode>()->b, [](int64_t x, int64_t y) -> int64_t { return x && y; });
    case NodeType::Or: return binary(e.as<OrNode>()->a, e.as<OrNode>()->b, [](int64_t x, int64_t y) -> int64_t { return x || y; });
    case NodeType::Not: {
      auto x = eval(e.as<NotNode>()->a, env);
      if (!x) return std::nullopt;
      return *x == 0;
    }
    case NodeType::Select: {
      const auto *s = e.as<SelectNode>();
      auto c = eval(s->condition, env);
      if (!c) return std::nullopt;
      return eval(*c ? s->true_value : s->false_value, env);
    }
    case NodeType::Let: {
      const auto *l = e.as<LetNode>();
      auto v = eval(l->value, env);
      if (!v) return std::nullopt;
      auto saved = env.find(l->var.get()) == env.end() ? std::nullopt : std::optional<int64_t>(env[l->var.get()]);
      env[l->var.get()] = *v;
      auto r = eval(l->body, env);
      if (saved) env[l->var.get()] = *saved; else env.erase(l->var.get());
      return r;
    }
    default: return std::nullopt;
  }
}

}  // namespace kiln::arith::testing
