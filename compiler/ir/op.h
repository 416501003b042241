#pragma once
// The expression language a user writes: operators with type promotion, constants, intrinsics.
#include <optional>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::ir {

// Constants.
Expr make_const(DataType t, int64_t v);
Expr make_const(DataType t, double v);
Expr make_zero(DataType t);
Expr make_one(DataType t);
Expr const_true(int lanes = 1);
Expr const_false(int lanes = 1);
// The largest / smallest finite value of a type (for max/min reducer identities).
Expr max_value(DataType t);
Expr min_value(DataType t);

// Constant queries (scalars or broadcasts of scalars).
std::optional<int64_t> as_const_int(const Expr &e);
std::optional<double> as_const_float(const Expr &e);
bool is_const_int(const Expr &e, int64_t v);
inline bool is_zero(const Expr &e) { return is_const_int(e, 0); }
inline bool is_one(const Expr &e) { return is_const_int(e, 1); }
bool is_const(const Expr &e);

// Converts e to type t (no-op when it already has it); vector lanes are broadcast.
Expr cast(DataType t, Expr e);

// Arithmetic with implicit promotion: constants adopt the other side's type; int mixed with
// float becomes float; narrower ints widen; scalars broadcast against vectors.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
// `/` on integers is C-style truncating division (like `truncdiv`); on floats it is division.
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr truncdiv(Expr a, Expr b);
Expr truncmod(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr select(Expr cond, Expr t, Expr f);
// Like select, but only the taken branch is evaluated (safe for out-of-bounds guarded reads).
Expr if_then_else(Expr cond, Expr t, Expr f);

// Math intrinsics (floating point).
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr rsqrt(Expr x);
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr erf(Expr x);
Expr pow(Expr x, Expr y);
Expr fabs(Expr x);
Expr abs(Expr x);  // integer or float
Expr floor(Expr x);
Expr ceil(Expr x);
Expr round(Expr x);
Expr fma(Expr a, Expr b, Expr c);
// Round half to even (what the current rounding mode gives), as ONNX's Round asks.
Expr nearbyint(Expr x);
Expr sin(Expr x);
Expr cos(Expr x);
Expr tan(Expr x);
Expr asin(Expr x);
Expr acos(Expr x);
Expr atan(Expr x);
Expr sinh(Expr x);
Expr cosh(Expr x);
Expr asinh(Expr x);
Expr acosh(Expr x);
Expr atanh(Expr x);

// Names of pure math intrinsics known to every back end.
bool is_math_intrinsic(const std::string &name);

// Internal intrinsics.
namespace intrinsic {
constexpr const char *kIfThenElse = "if_then_else";
constexpr const char *kLikely = "likely";             // hint: condition is usually true
constexpr const char *kSyncThreads = "sync_threads";  // GPU barrier within a block
// Hint: fetch the cache line holding the element that its one argument, a read of a tensor
// (ProducerLoad, a Load after storage flattening), would read; the element is not read and the
// call has no value. The LLVM back end emits llvm.prefetch (a read, kept in every cache level);
// the other back ends emit nothing.
constexpr const char *kPrefetch = "prefetch";
}  // namespace intrinsic
Expr likely(Expr cond);
// A prefetch of the element that `read` (a ProducerLoad or a scalar Load) reads.
Expr prefetch(Expr read);
// Whether e is a prefetch call.
bool is_prefetch(const Expr &e);

}  // namespace kiln::ir
