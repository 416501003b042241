#pragma once
// Evaluation of IR outside a lowered function, by the reference interpreter and with its semantics
// (interpreter.h): an expression or a statement whose free variables and buffers the caller binds.
// Tests of the simplifier and of the passes use it to check that a rewrite computes what its input
// computed.
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "compiler/interp/value.h"
#include "compiler/ir/ir.h"
#include "deploy/tensor.h"

namespace kiln::interp {

// The values of the free variables of the IR to evaluate and the tensors its buffer variables
// stand for. Binding a variable again replaces its value.
class Bindings {
 public:
  // v = value, for a scalar variable: wrapped to v's type if it is an integer type (bool: non-zero
  // is true), converted if it is a float type.
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Bindings &set(const ir::Var &v, T value) {
    return set_int(v, static_cast<int64_t>(value));
  }
  // v = value, an immediate of v's type (make_const; a C++ float converts to a float32 immediate).
  Bindings &set(const ir::Var &v, ir::Expr value);
  // For execute(): the buffer variable `data` (a handle) stands for the storage of `t`, whose dtype
  // is the element type of the loads and stores through `data`.
  Bindings &bind(const ir::Var &data, deploy::Tensor t);

  const std::vector<std::pair<ir::Var, ir::Expr>> &scalars() const { return scalars_; }
  const std::vector<std::pair<ir::Var, deploy::Tensor>> &buffers() const { return buffers_; }

 private:
  Bindings &set_int(const ir::Var &v, int64_t value);

  std::vector<std::pair<ir::Var, ir::Expr>> scalars_;
  std::vector<std::pair<ir::Var, deploy::Tensor>> buffers_;
};

// The value of `e`, an expression over the bound scalar variables; `b` binds no buffers (an
// expression that loads is evaluated by a statement that stores it, with execute()). Throws what
// run() throws: RuntimeError for a runtime failure (integer division by zero, a float cast out of
// range), InternalError for an unbound variable and for IR that is not lowered loop IR.
Value evaluate(const ir::Expr &e, const Bindings &b);

// Runs `s` with the bound scalars and tensors; its stores write to the tensors in place. Throws
// as run() does (an out-of-bounds access is a RuntimeError).
void execute(const ir::Stmt &s, const Bindings &b, const RunOptions &opt = {});

}  // namespace kiln::interp
