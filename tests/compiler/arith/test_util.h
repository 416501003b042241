#pragma once
// Helpers for the arithmetic tests: a small reference evaluator for integer expressions, written
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
