// Constant integer bounds of expressions, from the bounds of the variables. A result that leaves
// the range of its type is widened to the whole type, so the bounds stay sound when narrow or
// unsigned arithmetic wraps around.
#include <algorithm>
#include <vector>

#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/const_fold.h"
#include "compiler/ir/op.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

constexpr int64_t kNegInf = ConstIntBound::kNegInf;
constexpr int64_t kPosInf = ConstIntBound::kPosInf;

bool is_inf(int64_t v) { return v == kNegInf || v == kPosInf; }

int64_t saturate(__int128 v) {
  if (v >= kPosInf) return kPosInf;
  if (v <= kNegInf) return kNegInf;
  return static_cast<int64_t>(v);
}

ConstIntBound make_bound(int64_t lo, int64_t hi) {
  ConstIntBound b;
  b.min_value = lo;
  b.max_value = hi;
  return b;
}

ConstIntBound unite(const ConstIntBound &a, const ConstIntBound &b) {
  return make_bound(std::min(a.min_value, b.min_value), std::max(a.max_value, b.max_value));
}

// Division of a bound value by a non-zero finite constant; infinities keep their (flipped) sign.
int64_t div_value(int64_t a, int64_t c, bool floor) {
  if (is_inf(a)) return (a == kPosInf) == (c > 0) ? kPosInf : kNegInf;
  if (c == -1) return saturate(-static_cast<__int128>(a));
  return floor ? floor_div(a, c) : a / c;
}

ConstIntBound div_bound(const ConstIntBound &a, const ConstIntBound &b, bool floor) {
  if (b.min_value == b.max_value && b.min_value != 0 && !is_inf(b.min_value)) {
    const int64_t c = b.min_value;
    const int64_t x = div_value(a.min_value, c, floor), y = div_value(a.max_value, c, floor);
    return make_bound(std::min(x, y), std::max(x, y));
  }
  const bool positive = b.min_value > 0, negative = b.max_value < 0;
  if ((positive || negative) && is_finite(a) && is_finite(b)) {
    // Away from zero, the quotient is monotonic in each operand: the extremes are at the corners.
    int64_t lo = kPosInf, hi = kNegInf;
    for (int64_t x : {a.min_value, a.max_value}) {
      for (int64_t y : {b.min_value, b.max_value}) {
        const int64_t q = div_value(x, y, floor);
        lo = std::min(lo, q);
        hi = std::max(hi, q);
      }
    }
    return make_bound(lo, hi);
  }
  // |q| <= |a| whenever the divisor is a non-zero integer.
  const int64_t m = std::max(sat_mul(a.min_value, -1), a.max_value);
  if (a.min_value >= 0 && positive) return make_bound(0, m);
  return make_bound(sat_mul(m, -1), m);
}

ConstIntBound mod_bound(const ConstIntBound &a, const ConstIntBound &b, bool floor) {
  // Largest magnitude of the divisor minus one.
  const int64_t m = sat_sub(std::max(sat_mul(b.min_value, -1), b.max_value), 1);
  if (floor) {
    if (b.min_value > 0) {
      const int64_t c = b.max_value;
      if (b.min_value == c && is_finite(a) && floor_div(a.min_value, c) == floor_div(a.max_value, c)) {
        return make_bound(floor_mod(a.min_value, c), floor_mod(a.max_value, c));
      }
      if (a.min_value >= 0 && a.max_value < b.min_value) return a;
      return make_bound(0, sat_sub(c, 1));
    }
    if (b.max_value < 0) return make_bound(sat_add(b.min_value, 1), 0);
    return make_bound(sat_mul(m, -1), m);
  }
  // The truncating remainder has the sign of the dividend and |r| <= min(|a|, |b| - 1).
  const int64_t lo = a.min_value >= 0 ? 0 : std::max(a.min_value, sat_mul(m, -1));
  const int64_t hi = a.max_value <= 0 ? 0 : std::min(a.max_value, m);
  if (a.min_value >= 0 && b.min_value > 0 && a.max_value < b.min_value) return a;
  return make_bound(lo, hi);
}

class BoundEvaluator {
 public:
  explicit BoundEvaluator(const AnalyzerState &st) : st_(st) {}

  ConstIntBound eval(const Expr &e) {
    if (!e.defined()) return ConstIntBound();
    const DataType t = e.type();
    if (!t.is_integer_like()) return everything(t);
    ConstIntBound r = compute(e);
    const ConstIntBound all = everything(t);
    if (r.min_value < all.min_value || r.max_value > all.max_value || r.min_value > r.max_value) return all;
    return r;
  }

 private:
  ConstIntBound var_bound(const VariableNode *v) {
    for (auto it = local_.rbegin(); it != local_.rend(); ++it) {
      if (it->first == v) return it->second;
    }
    auto it = st_.vars.find(v);
    if (it != st_.vars.end()) return it->second.bound;
    return everything(v->type);
  }

  ConstIntBound compute(const Expr &e) {
    switch (e->node_type) {
      case NodeType::IntImm: {
        auto v = scalar_int(e);
        if (!v) return everything(e.type());
        return make_bound(*v, *v);
      }
      case NodeType::Variable:
        return var_bound(e.as<VariableNode>());
      case NodeType::Cast: {
        const auto *op = e.as<CastNode>();
        if (!op->value.type().is_integer_like()) return everything(e.type());
        ConstIntBound v = eval(op->value);
        if (e.type().is_bool()) return (v.min_value > 0 || v.max_value < 0) ? make_bound(1, 1) : make_bound(0, 1);
        return v;  // widened by eval when it does not fit
      }
      case NodeType::Add: {
        const auto *op = e.as<AddNode>();
        ConstIntBound a = eval(op->a), b = eval(op->b);
        return make_bound(sat_add(a.min_value, b.min_value), sat_add(a.max_value, b.max_value));
      }
      case NodeType::Sub: {
        const auto *op = e.as<SubNode>();
        ConstIntBound a = eval(op->a), b = eval(op->b);
        return make_bound(sat_sub(a.min_value, b.max_value), sat_sub(a.max_value, b.min_value));
      }
      case NodeType::Mul: {
        const auto *op = e.as<MulNode>();
        ConstIntBound a = eval(op->a), b = eval(op->b);
        int64_t lo = kPosInf, hi = kNegInf;
        for (int64_t x : {a.min_value, a.max_value}) {
          for (int64_t y : {b.min_value, b.max_value}) {
            const int64_t p = sat_mul(x, y);
            lo = std::min(lo, p);
            hi = std::max(hi, p);
          }
        }
        return make_bound(lo, hi);
      }
      case NodeType::Div: {
        const auto *op = e.as<DivNode>();
        return div_bound(eval(op->a), eval(op->b), false);
      }
      case NodeType::FloorDiv: {
        const auto *op = e.as<FloorDivNode>();
        return div_bound(eval(op->a), eval(op->b), true);
      }
      case NodeType::Mod: {
        const auto *op = e.as<ModNode>();
        return mod_bound(eval(op->a), eval(op->b), false);
      }
      case NodeType::FloorMod: {
        const auto *op = e.as<FloorModNode>();
        return mod_bound(eval(op->a), eval(op->b), true);
      }
      case NodeType::Min: {
        const auto *op = e.as<MinNode>();
        ConstIntBound a = eval(op->a), b = eval(op->b);
        return make_bound(std::min(a.min_value, b.min_value), std::min(a.max_value, b.max_value));
      }
      case NodeType::Max: {
        const auto *op = e.as<MaxNode>();
        ConstIntBound a = eval(op->a), b = eval(op->b);
        return make_bound(std::max(a.min_value, b.min_value), std::max(a.max_value, b.max_value));
      }
      case NodeType::Select: {
        const auto *op = e.as<SelectNode>();
        return unite(eval(op->true_value), eval(op->false_value));
      }
      case NodeType::Ramp: {
        const auto *op = e.as<RampNode>();
        ConstIntBound b = eval(op->base), s = eval(op->stride);
        const int64_t n = op->lanes - 1;
        ConstIntBound last =
            make_bound(sat_add(b.min_value, std::min(sat_mul(s.min_value, n), sat_mul(s.max_value, n))),
                       sat_add(b.max_value, std::max(sat_mul(s.min_value, n), sat_mul(s.max_value, n))));
        return unite(b, last);
      }
      case NodeType::Broadcast:
        return eval(e.as<BroadcastNode>()->value);
      case NodeType::Let: {
        const auto *op = e.as<LetNode>();
        local_.emplace_back(op->var.get(), eval(op->value));
        ConstIntBound r = eval(op->body);
        local_.pop_back();
        return r;
      }
      case NodeType::Call: {
        const auto *op = e.as<CallNode>();
        if (op->name == intrinsic::kIfThenElse && op->args.size() == 3)
          return unite(eval(op->args[1]), eval(op->args[2]));
        return everything(e.type());
      }
      default:
        // Deliberately a subset: the bound of any other node (a load, a float, a logical operator
        // ...) is every value of its type, which is always sound.
        return everything(e.type());
    }
  }

  const AnalyzerState &st_;
  std::vector<std::pair<const VariableNode *, ConstIntBound>> local_;
};

}  // namespace

int64_t sat_add(int64_t a, int64_t b) {
  if (is_inf(a)) return a;
  if (is_inf(b)) return b;
  return saturate(static_cast<__int128>(a) + b);
}

int64_t sat_sub(int64_t a, int64_t b) {
  if (is_inf(a)) return a;
  if (b == kPosInf) return kNegInf;
  if (b == kNegInf) return kPosInf;
  return saturate(static_cast<__int128>(a) - b);
}

int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (is_inf(a) || is_inf(b)) return ((a > 0) == (b > 0)) ? kPosInf : kNegInf;
  return saturate(static_cast<__int128>(a) * b);
}

ConstIntBound everything(DataType t) {
  if (!t.is_integer_like()) return ConstIntBound();
  ConstIntBound b;
  b.min_value = int_type_min(t);
  b.max_value = int_type_max(t);
  if (t.is_uint() && t.bits() >= 64) b.max_value = kPosInf;
  return b;
}

ConstIntBound intersect(const ConstIntBound &a, const ConstIntBound &b) {
  return make_bound(std::max(a.min_value, b.min_value), std::min(a.max_value, b.max_value));
}

ConstIntBound bound_of(const AnalyzerState &st, const Expr &e) { return BoundEvaluator(st).eval(e); }

ConstIntBound range_bound(const AnalyzerState &st, const Expr &min, const Expr &extent) {
  ConstIntBound m = bound_of(st, min), x = bound_of(st, extent);
  return make_bound(m.min_value, sat_add(m.max_value, sat_sub(x.max_value, 1)));
}

}  // namespace kiln::arith::detail
