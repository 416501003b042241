#pragma once
// Value: what an IR expression evaluates to in the interpreter, a scalar or a vector of lanes, and
// the exact per-type arithmetic on values.
#include <cstdint>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::interp {

// One lane. Integers are kept canonical for their type: signed types sign-extended in `i`,
// unsigned types (bool included, as 0 or 1) zero-extended in `u`. Floats are in `f`; a float32 or
// float16 lane always holds a value a float can represent.
union Lane {
  int64_t i;
  uint64_t u;
  double f;
};

// Lanes beyond 64 are not supported: lane masks are 64-bit words.
inline constexpr int kMaxLanes = 64;

class Value {
 public:
  Value() = default;
  explicit Value(ir::DataType t);

  ir::DataType type() const { return type_; }
  int lanes() const { return type_.lanes(); }
  Lane &operator[](int l) { return type_.lanes() > kInline ? heap_[l] : inline_[l]; }
  const Lane &operator[](int l) const { return type_.lanes() > kInline ? heap_[l] : inline_[l]; }

  static Value make_int(ir::DataType t, int64_t v);   // wrapped to t, every lane
  static Value make_float(ir::DataType t, double v);  // rounded to t, every lane

  // Lane l as a signed 64-bit integer (integer types only) or as a bool (non-zero).
  int64_t as_int(int l = 0) const { return (*this)[l].i; }
  bool as_bool(int l = 0) const { return (*this)[l].u != 0; }
  // One bit per lane: which lanes of a bool value are true.
  uint64_t true_mask() const;
  // "3", "-1.5", "[0, 1, 2, 3]".
  std::string to_string() const;

 private:
  static constexpr int kInline = 4;
  ir::DataType type_;
  Lane inline_[kInline] = {};
  std::vector<Lane> heap_;
};

// A mask with the low `lanes` bits set.
inline uint64_t all_lanes(int lanes) { return lanes >= 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1; }

// Wraps a raw 64-bit pattern to the canonical form of integer type t.
uint64_t wrap_int(ir::DataType t, uint64_t raw);
// Rounds to float32 unless t is float64 (float16 arithmetic is done in float32).
double round_float(ir::DataType t, double v);

// Binary operators (Add ... Max, EQ ... GE, And, Or) on same-typed values, lane by lane. Lanes not
// in `active` are not computed (they are left zero); for them integer division by zero is not an
// error. Throws RuntimeError for integer division by zero in an active lane.
Value binary_op(ir::NodeType op, const Value &a, const Value &b, uint64_t active);

// Converts v to type t lane by lane (same lanes). Throws RuntimeError for a float that does not
// fit the integer type t in an active lane.
Value cast_value(ir::DataType t, const Value &v, uint64_t active);

// A math intrinsic (exp, log, sqrt, rsqrt, tanh, sigmoid, erf, pow, fabs, floor, ceil, round,
// fma) on float values; args all have the result type.
Value math_intrinsic(const std::string &name, const std::vector<Value> &args);

}  // namespace kiln::interp
