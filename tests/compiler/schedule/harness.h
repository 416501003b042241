#pragma once
// Helpers for schedule tests: random inputs, running a lowered function through the interpreter
// and the C back end, and comparing results element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/c/c_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "deploy/tensor.h"

namespace kiln::testing {

inline deploy::Tensor make_tensor(const std::vector<int64_t> &shape, ir::DataType t) {
  return deploy::Tensor::empty(shape, ir::to_deploy_dtype(t));
}

// Fills with values in [-2, 2) for floats, [-8, 8) for signed ints, [0, 16) for unsigned.
inline void fill_random(deploy::Tensor &t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t n = t.numel();
  auto dt = t.dtype();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = rng();
    if (dt.code == deploy::DType::Float && dt.bits == 32) {
      static_cast<float *>(t.data())[i] = static_cast<float>(static_cast<double>(r % 4096) / 1024.0 - 2.0);
    } else if (dt.code == deploy::DType::Float && dt.bits == 64) {
      static_cast<double *>(t.data())[i] = static_cast<double>(r % 4096) / 1024.0 - 2.0;
    } else if (dt.code == deploy::DType::Int && dt.bits == 32) {
      static_cast<int32_t *>(t.data())[i] = static_cast<int32_t>(r % 16) - 8;
    } else if (dt.code == deploy::DType::Int && dt.bits == 8) {
      static_cast<int8_t *>(t.data())[i] = static_cast<int8_t>(static_cast<int>(r % 16) - 8);
    } else if (dt.code == deploy::DType::UInt && dt.bits == 8) {
      static_cast<uint8_t *>(t.data())[i] = static_cast<uint8_t>(r % 16);
    } else {
      std::memset(static_cast<char *>(t.data()) + i * dt.bytes(), static_cast<int>(r & 0x7f), dt.bytes());
    }
  }
}

inline deploy::Tensor clone(const deploy::Tensor &t) {
  deploy::Tensor c = deploy::Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

// Largest element-wise difference (as double), or +inf if shapes or dtypes differ.
inline double max_diff(const deploy::Tensor &a, const deploy::Tensor &b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return INFINITY;
  double m = 0;
  int64_t n = a.numel();
  auto dt = a.dtype();
  for (int64_t i = 0; i < n; ++i) {
    double x, y;
    if (dt.code == deploy::DType::Float && dt.bits == 32) {
      x = static_cast<const float *>(a.data())[i];
      y = static_cast<const float *>(b.data())[i];
    } else if (dt.code == deploy::DType::Float && dt.bits == 64) {
      x = static_cast<const double *>(a.data())[i];
      y = static_cast<const double *>(b.data())[i];
    } else if (dt.code == deploy::DType::Int && dt.bits == 32) {
      x = static_cast<const int32_t *>(a.data())[i];
      y = static_cast<const int32_t *>(b.data())[i];
    } else {
      x = std::memcmp(static_cast<const char *>(a.data()) + i * dt.bytes(),
                      static_cast<const char *>(b.data()) + i * dt.bytes(), dt.bytes());
      y = 0;
    }
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    m = std::max(m, std::fabs(x - y));
  }
  return m;
}

// Runs a lowered function on copies of `inputs` (inputs first, then outputs, as in the function's
// parameter list) and returns all tensors afterwards.
inline std::vector<deploy::Tensor> run_interp(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args) {
  std::vector<deploy::Tensor> copy;
  for (const auto &a : args) copy.push_back(clone(a));
  interp::run(f, copy);
  return copy;
}

inline std::vector<deploy::Tensor> run_c(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args) {
  std::vector<deploy::Tensor> copy;
  for (const auto &a : args) copy.push_back(clone(a));
  codegen::CModule m(f);
  int32_t rc = m.call(copy);
  EXPECT_EQ(rc, 0) << "generated C returned an error";
  return copy;
}

// Arguments with the given concrete shapes, randomly filled.
inline std::vector<deploy::Tensor> make_args(const ir::LoweredFunc &f, const std::vector<std::vector<int64_t>> &shapes,
                                             uint64_t seed) {
  std::vector<deploy::Tensor> args;
  for (size_t i = 0; i < f.params.size(); ++i) {
    args.push_back(make_tensor(shapes.at(i), f.params[i].dtype));
    fill_random(args.back(), seed + i);
  }
  return args;
}

}  // namespace kiln::testing

namespace kiln::testing {

// Lowers `sch` and an unscheduled schedule of the same outputs, runs both on the same random
// inputs (concrete `shapes` per argument) through the interpreter, and the scheduled one through
// the C back end too; every argument must match afterwards. Returns the scheduled function.
inline ir::LoweredFunc check_against_unscheduled(const te::Schedule &sch, const std::vector<te::Tensor> &args,
                                                 const std::vector<std::vector<int64_t>> &shapes, double tol,
                                                 uint64_t seed = 1, bool with_c = true) {
  auto ref_sch = te::create_schedule(sch.outputs());
  ir::LoweredFunc ref = lower::lower(*ref_sch, args, "reference");
  ir::LoweredFunc f = lower::lower(sch, args, "scheduled");
  auto in = make_args(ref, shapes, seed);
  auto expect = run_interp(ref, in);
  auto got = run_interp(f, in);
  for (size_t i = 0; i < args.size(); ++i) {
    EXPECT_LE(max_diff(expect[i], got[i]), tol) << "interpreter, argument " << args[i].name() << "\n" << f;
  }
  if (with_c) {
    auto got_c = run_c(f, in);
    for (size_t i = 0; i < args.size(); ++i) {
      EXPECT_LE(max_diff(expect[i], got_c[i]), tol) << "C back end, argument " << args[i].name() << "\n" << f;
    }
  }
  return f;
}

}  // namespace kiln::testing
