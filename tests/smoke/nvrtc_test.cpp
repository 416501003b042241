// The CUDA back end's NVRTC wrapper compiles CUDA C to PTX (no GPU needed).
#include "compiler/codegen/cuda/nvrtc_compiler.h"

#include <gtest/gtest.h>

namespace kiln::codegen {
namespace {

constexpr const char *kAxpy = R"(
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

TEST(NvrtcTest, CompilesKernelToPtx) {
  if (!nvrtc_available()) {
    GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC); nothing to compile with";
  }
  std::string ptx = compile_cuda_to_ptx(kAxpy, "axpy.cu", {"--gpu-architecture=compute_80"});
  EXPECT_NE(ptx.find(".entry"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("axpy"), std::string::npos);
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos);
  EXPECT_FALSE(nvrtc_version().empty());
}

TEST(NvrtcTest, CompileErrorCarriesTheLog) {
  if (!nvrtc_available()) {
    GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC); nothing to compile with";
  }
  try {
    compile_cuda_to_ptx("__global__ void k() { undeclared_name = 1; }", "bad.cu");
    FAIL() << "expected NvrtcError";
  } catch (const NvrtcError &e) {
    EXPECT_NE(e.log().find("undeclared_name"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("bad.cu"), std::string::npos) << e.what();
  }
}

TEST(NvrtcTest, WithoutCudaCompilingThrows) {
  if (nvrtc_available()) GTEST_SKIP() << "this build has NVRTC";
  EXPECT_THROW(compile_cuda_to_ptx(kAxpy, "axpy.cu"), NvrtcError);
  EXPECT_THROW(compile_cuda_to_ptx(kAxpy, "axpy.cu"), kiln::UserError);
}

}  // namespace
}  // namespace kiln::codegen
