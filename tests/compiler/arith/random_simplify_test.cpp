// Randomized checks: random integer expressions over three bounded variables are simplified and
// both versions are evaluated at every point of the bound box by the reference interpreter.
// Divisors are constants, variables and `variable + constant`, the last two drawn so that they are
// never zero in the box (one sign throughout), often with a minimum right at a dividend's bound.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <sstream>

#include "compiler/arith/analyzer.h"
#include "compiler/interp/evaluate.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"

namespace kiln::arith {
namespace {

using namespace ir;

struct Box {
  int64_t lo[3], hi[3];  // inclusive
};

class ExprGenerator {
 public:
  ExprGenerator(uint32_t seed, std::vector<Var> vars) : rng_(seed), vars_(std::move(vars)) {
    for (int v = 0; v < 3; ++v) {
      box_.lo[v] = -6;
      box_.hi[v] = 6;
    }
  }

  // The box the variables range over, so that variable divisors are never zero in it.
  void set_box(const Box &box) { box_ = box; }

  Expr int_expr(int depth) {
    if (depth == 0 || pick(10) < 3) return leaf();
    switch (pick(13)) {
      case 0:
        return int_expr(depth - 1) + int_expr(depth - 1);
      case 1:
        return int_expr(depth - 1) - int_expr(depth - 1);
      case 2:
        return int_expr(depth - 1) * constant(-4, 4);
      case 3:
        return int_expr(depth - 1) * int_expr(depth - 1);
      case 4:
        return floordiv(int_expr(depth - 1), divisor());
      case 5:
        return floormod(int_expr(depth - 1), divisor());
      case 6:
        return truncdiv(int_expr(depth - 1), divisor());
      case 7:
        return truncmod(int_expr(depth - 1), divisor());
      case 8:
        return min(int_expr(depth - 1), int_expr(depth - 1));
      case 9:
        return max(int_expr(depth - 1), int_expr(depth - 1));
      case 10:
        return select(bool_expr(depth - 1), int_expr(depth - 1), int_expr(depth - 1));
      case 11:
        return int_expr(depth - 1) * 8 + int_expr(depth - 1);
      default:
        return floordiv(int_expr(depth - 1) * 4 + leaf(), Expr(4));
    }
  }

  Expr bool_expr(int depth) {
    const int k = depth == 0 ? pick(6) : pick(9);
    Expr a = int_expr(std::max(depth - 1, 0)), b = int_expr(std::max(depth - 1, 0));
    switch (k) {
      case 0:
        return a < b;
      case 1:
        return a <= b;
      case 2:
        return a > b;
      case 3:
        return a >= b;
      case 4:
        return a == b;
      case 5:
        return a != b;
      case 6:
        return bool_expr(depth - 1) && bool_expr(depth - 1);
      case 7:
        return bool_expr(depth - 1) || bool_expr(depth - 1);
      default:
        return !bool_expr(depth - 1);
    }
  }

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

 private:
  Expr constant(int lo, int hi) { return Expr(std::uniform_int_distribution<int>(lo, hi)(rng_)); }
  Expr divisor() {
    const int kind = pick(4);
    if (kind >= 2) {
      const int v = pick(static_cast<int>(vars_.size()));
      const Var &var = vars_[static_cast<size_t>(v)];
      const int64_t lo = box_.lo[v], hi = box_.hi[v];
      // A positive divisor with its minimum at 1 to 3, or a negative one with its maximum at -1
      // to -3; a variable alone where its range already has one sign.
      const int64_t gap = pick(3);
      if (kind == 2 && (lo > 0 || hi < 0)) return var;
      if (pick(4) != 0) return var + Expr(static_cast<int>(1 + gap - lo));
      return var + Expr(static_cast<int>(-1 - gap - hi));
    }
    int d = 0;
    while (d == 0) d = std::uniform_int_distribution<int>(-5, 8)(rng_);
    return Expr(d);
  }
  Expr leaf() {
    if (pick(3) == 0) return constant(-8, 8);
    return vars_[static_cast<size_t>(pick(static_cast<int>(vars_.size())))];
  }

  std::mt19937 rng_;
  std::vector<Var> vars_;
  Box box_;
};

// Calls f(bindings, point) at every point of the box, the bindings giving the variables the
// coordinates of the point.
template <typename F>
void for_each_point(const std::vector<Var> &vars, const Box &box, F f) {
  interp::Bindings bindings;
  int64_t point[3];
  for (point[0] = box.lo[0]; point[0] <= box.hi[0]; ++point[0]) {
    for (point[1] = box.lo[1]; point[1] <= box.hi[1]; ++point[1]) {
      for (point[2] = box.lo[2]; point[2] <= box.hi[2]; ++point[2]) {
        for (size_t v = 0; v < 3; ++v) bindings.set(vars[v], point[v]);
        f(bindings, point);
      }
    }
  }
}

std::string describe(const std::vector<Var> &vars, const int64_t *point) {
  std::ostringstream os;
  for (size_t v = 0; v < vars.size(); ++v) os << vars[v].name() << "=" << point[v] << " ";
  return os.str();
}

// The value of an integer or boolean expression, or nullopt where the interpreter raises a runtime
// error (division by zero).
std::optional<int64_t> value_of(const Expr &e, const interp::Bindings &b) {
  try {
    return interp::evaluate(e, b).as_int();
  } catch (const RuntimeError &) {
    return std::nullopt;
  }
}

constexpr uint32_t kSeed = 20240611;

TEST(RandomSimplifyTest, SimplifiedExpressionsEvaluateTheSame) {
  std::vector<Var> vars{Var("x"), Var("y"), Var("z")};
  ExprGenerator gen(kSeed, vars);
  std::mt19937 box_rng(kSeed + 1);
  int failures = 0;
  for (int iter = 0; iter < 3000 && failures < 5; ++iter) {
    Box box;
    for (int v = 0; v < 3; ++v) {
      box.lo[v] = std::uniform_int_distribution<int>(-6, 4)(box_rng);
      box.hi[v] = box.lo[v] + std::uniform_int_distribution<int>(0, 7)(box_rng);
    }
    gen.set_box(box);
    const bool boolean = gen.pick(4) == 0;
    Expr e = boolean ? gen.bool_expr(3) : gen.int_expr(4);
    Analyzer ana;
    const bool bounded = gen.pick(4) != 0;
    if (bounded) {
      for (int v = 0; v < 3; ++v) {
        ana.bind(vars[static_cast<size_t>(v)],
                 Range(Expr(static_cast<int>(box.lo[v])), Expr(static_cast<int>(box.hi[v] - box.lo[v] + 1))));
      }
    }
    Expr s = ana.simplify(e);
    const bool proved = boolean && ana.can_prove(e);
    bool reported = false;
    for_each_point(vars, box, [&](const interp::Bindings &b, const int64_t *point) {
      if (reported) return;
      auto want = value_of(e, b);
      auto got = value_of(s, b);
      const bool wrong = !want || !got || *want != *got || (proved && *want == 0);
      if (wrong) {
        reported = true;
        ++failures;
        ADD_FAILURE() << "seed " << kSeed << " iteration " << iter << (bounded ? " (bounded)" : " (unbounded)")
                      << "\n  input:      " << to_string(e) << "\n  simplified: " << to_string(s) << "\n  at "
                      << describe(vars, point) << ": expected " << (want ? *want : -999999) << ", got "
                      << (got ? *got : -999999) << (proved ? " (can_prove said true)" : "");
      }
    });
  }
}

// Stores of the then (index 0) and else (index 1) branch values found in a statement.
void find_stores(const Stmt &s, Expr *then_value, Expr *else_value) {
  post_order_visit(s, [&](const IRNode *node) {
    if (node->node_type != NodeType::Store) return;
    const auto *store = static_cast<const StoreNode *>(node);
    if (is_zero(store->index)) *then_value = store->value;
    if (is_one(store->index)) *else_value = store->value;
  });
}

TEST(RandomSimplifyTest, StatementsUnderLoopsAndConditionsEvaluateTheSame) {
  std::vector<Var> vars{Var("x"), Var("y"), Var("z")};
  ExprGenerator gen(kSeed + 3, vars);
  std::mt19937 box_rng(kSeed + 4);
  Var buf("A", Handle());
  int failures = 0;
  for (int iter = 0; iter < 1500 && failures < 5; ++iter) {
    Box box;
    for (int v = 2; v >= 0; --v) {
      box.lo[v] = std::uniform_int_distribution<int>(-6, 4)(box_rng);
      box.hi[v] = box.lo[v] + std::uniform_int_distribution<int>(0, 6)(box_rng);
    }
    gen.set_box(box);
    Expr cond = gen.bool_expr(2);
    Expr then_value = gen.int_expr(3), else_value = gen.int_expr(3);
    Stmt body = IfThenElseNode::make(cond, StoreNode::make(buf, then_value, 0), StoreNode::make(buf, else_value, 1));
    for (int v = 2; v >= 0; --v) {
      body = ForNode::make(vars[static_cast<size_t>(v)], Expr(static_cast<int>(box.lo[v])),
                           Expr(static_cast<int>(box.hi[v] - box.lo[v] + 1)), ForKind::Serial, body);
    }
    Stmt s = simplify(body);
    Expr then_s, else_s;
    find_stores(s, &then_s, &else_s);
    bool reported = false;
    for_each_point(vars, box, [&](const interp::Bindings &b, const int64_t *point) {
      if (reported) return;
      auto c = value_of(cond, b);
      ASSERT_TRUE(c.has_value());
      const Expr &orig = *c ? then_value : else_value;
      const Expr &simp = *c ? then_s : else_s;
      auto want = value_of(orig, b);
      int64_t got = -999999;
      bool have = false;
      if (simp.defined()) {
        if (auto g = value_of(simp, b)) {
          got = *g;
          have = true;
        }
      }
      if (!want || !have || *want != got) {
        reported = true;
        ++failures;
        ADD_FAILURE() << "seed " << kSeed + 3 << " iteration " << iter << "\n  input:\n"
                      << to_string(body) << "  simplified:\n"
                      << to_string(s) << "  at " << describe(vars, point) << ": expected " << (want ? *want : -999999)
                      << ", got " << got;
      }
    });
  }
}

TEST(RandomSimplifyTest, SimplifyIsIdempotent) {
  std::vector<Var> vars{Var("x"), Var("y"), Var("z")};
  ExprGenerator gen(kSeed + 7, vars);
  int differing = 0;
  for (int iter = 0; iter < 1000; ++iter) {
    Expr e = gen.int_expr(4);
    Expr once = simplify(e);
    Expr twice = simplify(once);
    if (!structural_equal(once, twice)) {
      ++differing;
      if (differing <= 3) {
        ADD_FAILURE() << "seed " << kSeed + 7 << " iteration " << iter << ": " << to_string(e)
                      << "\n  once:  " << to_string(once) << "\n  twice: " << to_string(twice);
      }
    }
  }
  EXPECT_EQ(differing, 0);
}

}  // namespace
}  // namespace kiln::arith
