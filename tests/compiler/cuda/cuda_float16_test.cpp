// float16 in the CUDA back end: kernels compute float16 in half precision (cuda_fp16.h's __half),
// the generated source holds half arithmetic and none of the C back end's float emulation, NVRTC
// compiles it to f16 instructions, and the interpreter's result of the same kernels stays within
// float16's rounding of a float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/cuda/codegen_cuda.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/op.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::codegen {
namespace {

using contracts::Json;
using ir::IterVar;
using ir::Var;

// The source has none of the C back end's float16 emulation: its conversion helpers, 16-bit
// integer storage.
void expect_no_float_emulation(const std::string &src) {
  for (const char *helper : {"kiln_f16_to_f32", "kiln_f32_to_f16", "kiln_f16_round", "uint16_t*"}) {
    EXPECT_EQ(src.find(helper), std::string::npos) << helper << "\n" << src;
  }
}

ops::Target cuda_target() { return ops::Target(contracts::Target::parse("cuda -arch=sm_80"), 128); }

// Skips (visibly) where NVRTC or the toolkit's cuda_fp16.h is missing: a float16 kernel then is
// computed in float, which the other tests of the back end compile.
#define SKIP_WITHOUT_FP16_NVRTC()                                                                            \
  do {                                                                                                       \
    if (!nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";               \
    if (!nvrtc_has_fp16_header()) GTEST_SKIP() << "the CUDA toolkit's include directory has no cuda_fp16.h"; \
  } while (0)

// The PTX of f for sm_80 and sm_90 (those this NVRTC supports).
std::vector<std::string> ptx_for_sm80_sm90(const ir::LoweredFunc &f) {
  std::vector<std::string> out;
  const std::vector<int> supported = nvrtc_supported_archs();
  for (int cc : {80, 90}) {
    if (std::find(supported.begin(), supported.end(), cc) == supported.end()) {
      ADD_FAILURE() << "NVRTC " << nvrtc_version() << " does not compile for sm_" << cc;
      continue;
    }
    CudaModule m(f, parse_cuda_target(detail::concat("cuda -arch=sm_", cc)));
    EXPECT_NE(m.get_source().find("#include <cuda_fp16.h>"), std::string::npos) << m.get_source();
    out.push_back(m.ptx());
  }
  return out;
}

double half_at(const deploy::Tensor &t, int64_t i) {
  return static_cast<double>(ir::half_to_float(static_cast<const uint16_t *>(t.data())[i]));
}

// dense.cuda on float16 data [M, K] and weight [N, K], accumulated in float16 (no out_dtype) or
// in float32.
struct Dense {
  static constexpr int64_t M = 16, N = 24, K = 128;
  explicit Dense(bool f32_accumulate) : f32_out(f32_accumulate) {
    const Json data = Json::parse(R"({"shape": [16, 128], "dtype": "float16"})");
    const Json weight = Json::parse(R"({"shape": [24, 128], "dtype": "float16"})");
    Json args = Json::object({{"data", data}, {"weight", weight}});
    if (f32_out) args = Json::object({{"data", data}, {"weight", weight}, {"out_dtype", Json("float32")}});
    task = std::make_unique<ops::Task>("dense.cuda", args, cuda_target());
  }
  bool f32_out;
  std::unique_ptr<ops::Task> task;
};

// Random halves in [-1, 1) on a grid of 1/64.
deploy::Tensor random_halves(int64_t rows, int64_t cols, std::mt19937_64 &rng) {
  deploy::Tensor t = testing::make_tensor({rows, cols}, ir::Float(16));
  for (int64_t i = 0; i < rows * cols; ++i) {
    static_cast<uint16_t *>(t.data())[i] = ir::float_to_half(static_cast<float>(rng() % 128) / 64.0f - 1.0f);
  }
  return t;
}

// The generated kernel of a float16 dense with float16 accumulation computes in __half: its
// accumulator is a __half register tile updated by __hfma, and none of the C back end's float
// emulation is left. Without half compute (an architecture before sm_53) the emulation stays.
TEST(CudaFloat16, HalfAccumulatedDenseIsWrittenInHalfArithmetic) {
  Dense d(false);
  const ir::LoweredFunc f = d.task->lower(d.task->default_config(), "dense_f16");
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("#include <cuda_fp16.h>"), std::string::npos) << src;
  EXPECT_NE(src.find("__hfma("), std::string::npos) << src;
  EXPECT_NE(src.find("__half* __restrict__ data"), std::string::npos) << src;
  EXPECT_NE(src.find("__align__(16) __half"), std::string::npos) << src;  // the local accumulator tile
  expect_no_float_emulation(src);
  EXPECT_EQ(src.find("__half2float"), std::string::npos) << src;

  const std::string emulated = codegen_cuda(f, /*half_compute=*/false);
  EXPECT_NE(emulated.find("kiln_f16_to_f32"), std::string::npos) << emulated;
  EXPECT_EQ(emulated.find("__half"), std::string::npos) << emulated;
  EXPECT_EQ(emulated.find("cuda_fp16.h"), std::string::npos) << emulated;
  // The emulated form (what CudaModule writes where NVRTC has no cuda_fp16.h) compiles without the
  // toolkit's headers and computes in f32.
  if (!nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  const std::string ptx =
      compile_cuda_to_ptx(emulated, "dense_f16.cu", {"--gpu-architecture=compute_80", "-default-device"});
  EXPECT_NE(ptx.find("fma.rn.f32"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find("fma.rn.f16"), std::string::npos) << ptx;
}

// NVRTC compiles it for sm_80 and sm_90 with half-precision FMAs (fma.rn.f16, or its two-lane
// form fma.rn.f16x2) and no conversions between half and float.
TEST(CudaFloat16, HalfAccumulatedDenseCompilesToF16Fma) {
  SKIP_WITHOUT_FP16_NVRTC();
  Dense d(false);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3; ++i) {
    const autotune::Config cfg = i == 0 ? d.task->default_config() : d.task->space().sample(rng);
    SCOPED_TRACE(cfg.to_string());
    for (const std::string &ptx : ptx_for_sm80_sm90(d.task->lower(cfg, "dense_f16"))) {
      EXPECT_NE(ptx.find("fma.rn.f16"), std::string::npos) << ptx;
      EXPECT_EQ(ptx.find("cvt.f32.f16"), std::string::npos) << ptx;
      EXPECT_EQ(ptx.find("fma.rn.f32"), std::string::npos) << ptx;
    }
  }
}

// With float32 accumulation the halves are converted to float where they are loaded and the
// products accumulate in float: f32 FMAs, conversions from f16, no f16 FMA.
TEST(CudaFloat16, FloatAccumulatedDenseConvertsOnLoadAndAccumulatesInFloat) {
  Dense d(true);
  const ir::LoweredFunc f = d.task->lower(d.task->default_config(), "dense_f16_f32");
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("__half2float("), std::string::npos) << src;
  EXPECT_EQ(src.find("__hfma("), std::string::npos) << src;
  expect_no_float_emulation(src);
  SKIP_WITHOUT_FP16_NVRTC();
  for (const std::string &ptx : ptx_for_sm80_sm90(f)) {
    EXPECT_NE(ptx.find("cvt.f32.f16"), std::string::npos) << ptx;
    EXPECT_NE(ptx.find("fma.rn.f32"), std::string::npos) << ptx;
    EXPECT_EQ(ptx.find("fma.rn.f16"), std::string::npos) << ptx;
  }
}

// The interpreter's result of the kernels (the lowered function and the IR the kernel is written
// from) against a float64 reference on the same half inputs. Accumulated in float16, each of the
// K steps rounds to half (unit roundoff u = 2^-11) after the product and after the sum, so
// |got - exact| <= (K + 2) * u * sum_k |a_ik * b_jk| (to first order in u); accumulated in float32
// with a float output, the bound is the same with u = 2^-24.
TEST(CudaFloat16, DenseMatchesAFloat64ReferenceWithinHalfRounding) {
  std::mt19937_64 rng(11);
  const int64_t M = Dense::M, N = Dense::N, K = Dense::K;
  const deploy::Tensor a = random_halves(M, K, rng), b = random_halves(N, K, rng);
  std::vector<double> exact(M * N, 0.0), magnitude(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t k = 0; k < K; ++k) {
        const double p = half_at(a, i * K + k) * half_at(b, j * K + k);
        exact[i * N + j] += p;
        magnitude[i * N + j] += std::abs(p);
      }
    }
  }
  for (bool f32_out : {false, true}) {
    SCOPED_TRACE(f32_out ? "float32 accumulation" : "float16 accumulation");
    Dense d(f32_out);
    const double u = f32_out ? std::ldexp(1.0, -24) : std::ldexp(1.0, -11);
    std::mt19937_64 pick(9);
    double worst = 0;  // the largest error, as a fraction of its bound
    for (int c = 0; c < 6; ++c) {
      const autotune::Config cfg = c == 0 ? d.task->default_config() : d.task->space().sample(pick);
      SCOPED_TRACE(cfg.to_string());
      const ir::LoweredFunc f = d.task->lower(cfg, "k");
      for (const ir::LoweredFunc &g : {f, cuda_kernel_ir(f)}) {
        std::vector<deploy::Tensor> args = {testing::clone(a), testing::clone(b),
                                            testing::make_tensor({M, N}, f.params[2].dtype)};
        args = testing::run_interp(g, args);
        for (int64_t i = 0; i < M * N; ++i) {
          const double got = f32_out ? static_cast<const float *>(args[2].data())[i] : half_at(args[2], i);
          const double bound = static_cast<double>(K + 2) * u * magnitude[i];
          ASSERT_LE(std::abs(got - exact[i]), bound) << "element " << i << " exact " << exact[i];
          worst = std::max(worst, std::abs(got - exact[i]) / bound);
        }
      }
    }
    // Half accumulation does round: the check above measures something.
    if (!f32_out) {
      EXPECT_GT(worst, 0.0);
    }
  }
}

// A float16 elementwise kernel, relu(A + 1.5): half addition and max in the source (the immediate
// as the bits of the half 1.5), add.f16 and max.f16 in the PTX; the interpreter's result is the
// correctly rounded half of each element's exact value.
TEST(CudaFloat16, ElementwiseKernelComputesInHalf) {
  const int n = 1000;
  auto A = te::placeholder({n}, ir::Float(16), "A");
  auto B = te::compute(
      {n},
      [&](Var i) { return ir::max(A(i) + ir::make_const(ir::Float(16), 1.5), ir::make_const(ir::Float(16), 0.0)); },
      "B");
  auto s = te::create_schedule({B});
  IterVar bx, tx;
  (*s)[B].split((*s)[B].axis(0), 128, &bx, &tx);
  (*s)[B].bind(bx, "blockIdx.x");
  (*s)[B].bind(tx, "threadIdx.x");
  const ir::LoweredFunc f = lower::lower(*s, {A, B}, "relu_add_f16");

  std::mt19937_64 rng(2);
  std::vector<deploy::Tensor> args = {random_halves(1, n, rng), testing::make_tensor({n}, ir::Float(16))};
  // Reshape A to 1-D: same data, the shape the function takes.
  deploy::Tensor a1 = testing::make_tensor({n}, ir::Float(16));
  std::copy_n(static_cast<const uint16_t *>(args[0].data()), n, static_cast<uint16_t *>(a1.data()));
  args[0] = a1;
  args = testing::run_interp(f, args);
  for (int i = 0; i < n; ++i) {
    const float want = ir::round_to_half(std::max(static_cast<float>(half_at(args[0], i)) + 1.5f, 0.0f));
    ASSERT_EQ(half_at(args[1], i), want) << i;
  }

  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("__hmax(__hadd("), std::string::npos) << src;
  EXPECT_NE(src.find("__ushort_as_half((unsigned short)0x3e00u)"), std::string::npos) << src;  // 1.5
  expect_no_float_emulation(src);
  SKIP_WITHOUT_FP16_NVRTC();
  for (const std::string &ptx : ptx_for_sm80_sm90(f)) {
    EXPECT_NE(ptx.find("add.f16"), std::string::npos) << ptx;
    EXPECT_NE(ptx.find("max.f16"), std::string::npos) << ptx;
    EXPECT_EQ(ptx.find("cvt.f32.f16"), std::string::npos) << ptx;
  }
  // Every architecture this NVRTC supports has half arithmetic and compiles the kernel (before
  // sm_80, cuda_fp16.h writes __hmax without max.f16).
  for (int cc : nvrtc_supported_archs()) {
    const CudaTarget target = parse_cuda_target(detail::concat("cuda -arch=sm_", cc));
    SCOPED_TRACE(target.arch());
    EXPECT_TRUE(target.has_half_arithmetic());
    EXPECT_NE(CudaModule(f, target).ptx().find("add.f16"), std::string::npos);
  }
}

// Casts between float16 and other types, a comparison, fma (in half) and math functions (exp,
// sigmoid: in float, rounded to half) compile for sm_80 and sm_90; a kernel without float16
// includes no cuda_fp16.h.
TEST(CudaFloat16, CastsComparisonsAndMathFunctionsCompile) {
  const int n = 256;
  auto A = te::placeholder({n}, ir::Float(16), "A");
  auto I = te::placeholder({n}, ir::Int(32), "I");
  auto B = te::compute(
      {n},
      [&](Var i) {
        const ir::Expr c = ir::make_const(ir::Float(16), 0.75);
        ir::Expr h = ir::cast(ir::Float(16), I(i)) - A(i);
        h = ir::select(A(i) < c, ir::fma(h, c, A(i)), ir::sigmoid(h));
        return ir::cast(ir::Float(32), ir::exp(h)) + ir::cast(ir::Float(32), ir::cast(ir::Int(32), A(i)));
      },
      "B");
  auto s = te::create_schedule({B});
  IterVar bx, tx;
  (*s)[B].split((*s)[B].axis(0), 64, &bx, &tx);
  (*s)[B].bind(bx, "blockIdx.x");
  (*s)[B].bind(tx, "threadIdx.x");
  const ir::LoweredFunc f = lower::lower(*s, {A, I, B}, "casts_f16");
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("__float2half_rn((float)"), std::string::npos) << src;
  EXPECT_NE(src.find("((int32_t)__half2float("), std::string::npos) << src;
  EXPECT_NE(src.find("__hsub("), std::string::npos) << src;
  EXPECT_NE(src.find("__float2half_rn(expf(__half2float("), std::string::npos) << src;
  EXPECT_NE(src.find("__hlt("), std::string::npos) << src;
  EXPECT_NE(src.find("__hfma("), std::string::npos) << src;
  expect_no_float_emulation(src);

  auto C = te::placeholder({n}, ir::Float(32), "C");
  auto D = te::compute(
      {n}, [&](Var i) { return C(i) * 2.0f; }, "D");
  auto s2 = te::create_schedule({D});
  (*s2)[D].bind((*s2)[D].axis(0), "threadIdx.x");
  EXPECT_EQ(codegen_cuda(lower::lower(*s2, {C, D}, "f32_only")).find("cuda_fp16.h"), std::string::npos);

  SKIP_WITHOUT_FP16_NVRTC();
  for (const std::string &ptx : ptx_for_sm80_sm90(f)) {
    EXPECT_NE(ptx.find(".entry casts_f16"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::codegen
