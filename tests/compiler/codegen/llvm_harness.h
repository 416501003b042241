#pragma once
// Helpers for the LLVM back end's tests: run a lowered function through the interpreter (the
// oracle) and through LLVM on copies of the same arguments, and compare.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/ir_printer.h"
#include "deploy/tensor.h"
#include "tests/compiler/interp/both_backends.h"

namespace kiln::test {

// C[i, j] = A[i, j] + B[j] over symbolic rows n and 4 columns.
inline ir::LoweredFunc row_add() {
  ir::Var n("n");
  ir::Buffer A = ir::make_buffer("A", ir::Float(32), {n, 4});
  ir::Buffer B = ir::make_buffer("B", ir::Float(32), {4});
  ir::Buffer C = ir::make_buffer("C", ir::Float(32), {n, 4});
  ir::Var i("i"), j("j");
  return make_func("row_add", {A, B, C}, {n},
                   loop(i, n, loop(j, 4, store(C, load(A, A.offset_of({i, j})) + load(B, j), C.offset_of({i, j})))));
}

// The target the tests compile for: the host CPU with all its features.
inline codegen::LLVMBuildOptions native_options() {
  codegen::LLVMBuildOptions o;
  o.target = "llvm -mcpu=native";
  return o;
}

struct LLVMResults {
  std::vector<deploy::Tensor> interp;
  std::vector<deploy::Tensor> llvm;
};

// Runs f through interp::run and an LLVMModule; expects both to succeed.
inline LLVMResults run_interp_and_llvm(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args,
                                       const codegen::LLVMBuildOptions &options = native_options()) {
  LLVMResults r;
  for (const auto &a : args) {
    r.interp.push_back(clone(a));
    r.llvm.push_back(clone(a));
  }
  interp::run(f, r.interp);
  codegen::LLVMModule m(f, options);
  const int32_t status = m.call_status(f.name, r.llvm);
  EXPECT_EQ(status, 0) << m.last_error() << "\n" << f;
  return r;
}

// Largest difference between two tensors of one dtype, element by element: exact (bitwise) for
// integers and float16, absolute for floats (NaN only matches NaN). +inf if they differ in shape.
inline double tensor_diff(const deploy::Tensor &a, const deploy::Tensor &b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return INFINITY;
  const auto dt = a.dtype();
  const int64_t n = a.numel();
  const char *pa = static_cast<const char *>(a.data());
  const char *pb = static_cast<const char *>(b.data());
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (dt.code == deploy::DType::Float && (dt.bits == 32 || dt.bits == 64)) {
      const double x = dt.bits == 32 ? reinterpret_cast<const float *>(pa)[i] : reinterpret_cast<const double *>(pa)[i];
      const double y = dt.bits == 32 ? reinterpret_cast<const float *>(pb)[i] : reinterpret_cast<const double *>(pb)[i];
      if (std::isnan(x) != std::isnan(y)) return INFINITY;
      if (!std::isnan(x) && x != y) m = std::max(m, std::isinf(x) || std::isinf(y) ? INFINITY : std::fabs(x - y));
    } else if (std::memcmp(pa + i * dt.bytes(), pb + i * dt.bytes(), dt.bytes()) != 0) {
      return INFINITY;
    }
  }
  return m;
}

// Expects every argument to match within `tol` (0: exactly).
inline void expect_same(const LLVMResults &r, double tol = 0.0) {
  ASSERT_EQ(r.interp.size(), r.llvm.size());
  for (size_t i = 0; i < r.interp.size(); ++i) {
    EXPECT_LE(tensor_diff(r.interp[i], r.llvm[i]), tol) << "argument " << i;
  }
}

}  // namespace kiln::test
