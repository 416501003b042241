#include "compiler/arith/expr_equal.h"

#include <cmath>

namespace kiln::arith::detail {

namespace {

using namespace ir;

bool equal_exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!expr_equal(a[i], b[i])) return false;
  }
  return true;
}

template <typename T>
bool equal_binary(const Expr &a, const Expr &b) {
  const auto *x = a.as<T>();
  const auto *y = b.as<T>();
  return expr_equal(x->a, y->a) && expr_equal(x->b, y->b);
}

}  // namespace

bool expr_equal(const Expr &a, const Expr &b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->node_type != b->node_type || a->type != b->type) return false;
  switch (a->node_type) {
    case NodeType::IntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case NodeType::FloatImm: {
      double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
      return x == y ? std::signbit(x) == std::signbit(y) : (std::isnan(x) && std::isnan(y));
    }
    case NodeType::StringImm:
      return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
    case NodeType::Variable:
      return false;  // distinct nodes are distinct variables
    case NodeType::Cast:
      return expr_equal(a.as<CastNode>()->value, b.as<CastNode>()->value);
#define KILN_EQ_BINARY(n) \
  case NodeType::n:       \
    return equal_binary<n##Node>(a, b);
      KILN_EQ_BINARY(Add)
      KILN_EQ_BINARY(Sub)
      KILN_EQ_BINARY(Mul)
      KILN_EQ_BINARY(Div)
      KILN_EQ_BINARY(Mod)
      KILN_EQ_BINARY(FloorDiv)
      KILN_EQ_BINARY(FloorMod)
      KILN_EQ_BINARY(Min)
      KILN_EQ_BINARY(Max)
      KILN_EQ_BINARY(EQ)
      KILN_EQ_BINARY(NE)
      KILN_EQ_BINARY(LT)
      KILN_EQ_BINARY(LE)
      KILN_EQ_BINARY(GT)
      KILN_EQ_BINARY(GE)
      KILN_EQ_BINARY(And)
      KILN_EQ_BINARY(Or)
#undef KILN_EQ_BINARY
    case NodeType::Not:
      return expr_equal(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case NodeType::Select: {
      const auto *x = a.as<SelectNode>();
      const auto *y = b.as<SelectNode>();
      return expr_equal(x->condition, y->condition) && expr_equal(x->true_value, y->true_value) &&
             expr_equal(x->false_value, y->false_value);
    }
    case NodeType::Ramp: {
      const auto *x = a.as<RampNode>();
      const auto *y = b.as<RampNode>();
      return x->lanes == y->lanes && expr_equal(x->base, y->base) && expr_equal(x->stride, y->stride);
    }
    case NodeType::Broadcast: {
      const auto *x = a.as<BroadcastNode>();
      const auto *y = b.as<BroadcastNode>();
      return x->lanes == y->lanes && expr_equal(x->value, y->value);
    }
    case NodeType::Let: {
      const auto *x = a.as<LetNode>();
      const auto *y = b.as<LetNode>();
      return x->var.same_as(y->var) && expr_equal(x->value, y->value) && expr_equal(x->body, y->body);
    }
    case NodeType::Call: {
      const auto *x = a.as<CallNode>();
      const auto *y = b.as<CallNode>();
      return x->name == y->name && x->kind == y->kind && equal_exprs(x->args, y->args);
    }
    case NodeType::Load: {
      const auto *x = a.as<LoadNode>();
      const auto *y = b.as<LoadNode>();
      return x->buffer_var.same_as(y->buffer_var) && expr_equal(x->index, y->index) &&
             (x->predicate.defined() == y->predicate.defined()) &&
             (!x->predicate.defined() || expr_equal(x->predicate, y->predicate));
    }
    case NodeType::ProducerLoad: {
      const auto *x = a.as<ProducerLoadNode>();
      const auto *y = b.as<ProducerLoadNode>();
      return x->producer == y->producer && x->value_index == y->value_index && equal_exprs(x->indices, y->indices);
    }
    case NodeType::Reduce: {
      const auto *x = a.as<ReduceNode>();
      const auto *y = b.as<ReduceNode>();
      if (x->combiner != y->combiner || x->value_index != y->value_index || x->axis.size() != y->axis.size()) {
        return false;
      }
      for (size_t i = 0; i < x->axis.size(); ++i) {
        if (!x->axis[i].same_as(y->axis[i])) return false;
      }
      return equal_exprs(x->source, y->source) && expr_equal(x->condition, y->condition);
    }
    default:
      return false;
  }
}

}  // namespace kiln::arith::detail
