// driver::build and build_and_run: a schedule built and run on deploy::Tensors in one call, the
// results against a plain loop, and the messages of a call with the wrong tensors.
#include "compiler/driver/build.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "compiler/te/schedule.h"
#include "deploy/module.h"

namespace kiln::driver {
namespace {

using deploy::DType;
using deploy::Tensor;

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937 &rng) {
  Tensor t = Tensor::empty(std::move(shape), DType::of<float>());
  std::uniform_real_distribution<float> dist(-1, 1);
  float *p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

struct Matmul {
  te::Tensor A, B, C;
  te::ScheduleOwner s;
};

// C = A * B for A n x k, B k x m (n a size variable), tiled 8 x 8 with the reduction inside.
Matmul tiled_matmul(int k, int m) {
  ir::Var n("n");
  te::Tensor A = te::placeholder({n, ir::Expr(k)}, ir::Float(32), "A");
  te::Tensor B = te::placeholder({ir::Expr(k), ir::Expr(m)}, ir::Float(32), "B");
  auto r = te::reduce_axis(k, "r");
  te::Tensor C = te::compute(
      {n, ir::Expr(m)}, [&](ir::Var i, ir::Var j) { return te::sum(A(i, r) * B(r, j), {r}); }, "C");
  auto s = te::create_schedule({C});
  auto [io, jo, ii, ji] = s[C].tile(C.axis(0), C.axis(1), {8, 8});
  s[C].reorder({io, jo, C.reduce_axis(0), ii, ji});
  return {A, B, C, std::move(s)};
}

TEST(Build, MatmulMatchesAPlainLoop) {
  const int n = 37, k = 19, m = 24;
  std::mt19937 rng(0);
  Matmul mm = tiled_matmul(k, m);
  BuiltFunction f = build(*mm.s, {mm.A, mm.B, mm.C}, "llvm", "matmul");
  EXPECT_EQ(f.entry_name(), "matmul");
  deploy::Tensor a = random_tensor({n, k}, rng), b = random_tensor({k, m}, rng);
  deploy::Tensor c = deploy::Tensor::empty({n, m}, DType::of<float>());
  f({a, b, c});
  const float *pa = a.data_as<float>(), *pb = b.data_as<float>(), *pc = c.data_as<float>();
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < m; ++j) {
      float want = 0;
      for (int r = 0; r < k; ++r) want += pa[i * k + r] * pb[r * m + j];
      ASSERT_NEAR(pc[i * m + j], want, 1e-4) << "C[" << i << ", " << j << "]";
    }
  }
}

TEST(Build, BuildAndRunIsOneCall) {
  te::Tensor A = te::placeholder({ir::Expr(100)}, ir::Float(32), "A");
  te::Tensor B = te::compute(
      {ir::Expr(100)}, [&](ir::Var i) { return A(i) * 3.0f + 1.0f; }, "B");
  auto s = te::create_schedule({B});
  s[B].split(B.axis(0), 32);
  std::mt19937 rng(1);
  deploy::Tensor a = random_tensor({100}, rng);
  deploy::Tensor b = deploy::Tensor::empty({100}, DType::of<float>());
  build_and_run(*s, {A, B}, {a, b});
  for (int i = 0; i < 100; ++i) ASSERT_FLOAT_EQ(b.data_as<float>()[i], a.data_as<float>()[i] * 3.0f + 1.0f) << i;
}

// The message of a rejected call, which must be a KernelError (a UserError).
std::string rejection(const BuiltFunction &f, const std::vector<deploy::Tensor> &args) {
  try {
    f(args);
  } catch (const deploy::KernelError &e) {
    EXPECT_EQ(e.code(), kKilnErrorArgument);
    return e.what();
  }
  ADD_FAILURE() << "the call was not rejected";
  return "";
}

TEST(Build, WrongTensorsNameTheArgumentTheSignatureAndWhatWasGiven) {
  Matmul mm = tiled_matmul(4, 8);
  BuiltFunction f = build(*mm.s, {mm.A, mm.B, mm.C}, "llvm", "matmul");
  auto f32 = [](std::vector<int64_t> shape) { return deploy::Tensor::empty(std::move(shape), DType::of<float>()); };
  const std::string signature = "; signature matmul(A: float32[n, 4], B: float32[4, 8], C: float32[n, 8])";

  EXPECT_EQ(rejection(f, {f32({5, 4}), f32({4, 8}), f32({6, 8})}),
            "matmul: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A))" + signature +
                "; given (float32[5, 4], float32[4, 8], float32[6, 8])");
  EXPECT_EQ(rejection(f, {f32({5, 4}), f32({3, 8}), f32({5, 8})}),
            "matmul: argument 2 (B): dimension 0 must be 4" + signature +
                "; given (float32[5, 4], float32[3, 8], float32[5, 8])");
  EXPECT_EQ(rejection(f, {f32({5, 4}), deploy::Tensor::empty({4, 8}, DType::of<double>()), f32({5, 8})}),
            "matmul: argument 2 (B): expected dtype float32" + signature +
                "; given (float32[5, 4], float64[4, 8], float32[5, 8])");
  EXPECT_EQ(rejection(f, {f32({5, 4}), f32({4, 8})}).rfind("matmul: expected 3 arguments", 0), 0u);
  EXPECT_EQ(
      rejection(f, {f32({5, 4}), f32({4, 8}), f32({5})}).rfind("matmul: argument 3 (C): expected 2 dimensions", 0), 0u);
}

TEST(Build, AnUnknownFunctionOrABadTargetIsAUserError) {
  Matmul mm = tiled_matmul(4, 8);
  BuiltFunction f = build(*mm.s, {mm.A, mm.B, mm.C});
  EXPECT_THROW(f.call("nosuch", std::vector<deploy::Tensor>{}), deploy::ModuleError);
  EXPECT_THROW(build(*mm.s, {mm.A, mm.B, mm.C}, "llvm -mcpu=nosuchcpu"), UserError);
}

}  // namespace
}  // namespace kiln::driver
