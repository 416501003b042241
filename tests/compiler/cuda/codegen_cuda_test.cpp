// The CUDA back end: hand-scheduled tensor programs bound to GPU blocks and threads. Their lowered
// IR runs in the interpreter's GPU simulation against plain loops over the inputs, and the CUDA C
// generated from it compiles with NVRTC for sm_70, sm_80 and sm_90.
#include "compiler/codegen/cuda/codegen_cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/codegen/c/codegen_c.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::codegen {
namespace {

using ir::IterVar;
using ir::Var;

const float *f32(const deploy::Tensor &t) { return static_cast<const float *>(t.data()); }

// Compiles f for sm_70, sm_80 and sm_90 and checks the PTX: its entry and its target. An
// architecture this NVRTC has dropped is refused with NvrtcError (Sm70WithThisToolkit reports it).
void expect_compiles_everywhere(const ir::LoweredFunc &f) {
  if (!nvrtc_available()) {
    GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC); the source is not compiled";
  }
  const std::vector<int> supported = nvrtc_supported_archs();
  for (const char *arch : {"sm_70", "sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    CudaTarget target = parse_cuda_target(std::string("cuda -arch=") + arch);
    if (std::find(supported.begin(), supported.end(), target.compute_capability) == supported.end()) {
      EXPECT_THROW(CudaModule(f, target), NvrtcError);
      continue;
    }
    CudaModule m(f, target);
    EXPECT_NE(m.ptx().find(".entry " + m.entry_name()), std::string::npos) << m.ptx();
    EXPECT_NE(m.ptx().find(".target " + std::string(arch)), std::string::npos) << m.ptx();
  }
}

// Which of the architectures the tests compile for this NVRTC lacks: a visible skip, not a pass.
TEST(CudaCodegen, ToolkitCompilesForSm70Sm80Sm90) {
  if (!nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  const std::vector<int> supported = nvrtc_supported_archs();
  std::string missing;
  for (int cc : {70, 80, 90}) {
    if (std::find(supported.begin(), supported.end(), cc) == supported.end()) {
      missing += detail::concat(missing.empty() ? "" : ", ", "sm_", cc);
    }
  }
  if (!missing.empty()) {
    GTEST_SKIP() << "NVRTC " << nvrtc_version() << " does not compile for " << missing
                 << "; the kernels are compiled for the other architectures only";
  }
}

// C[i] = A[i] + B[i], n not a multiple of the block.
TEST(CudaCodegen, VectorAddOverBlocksAndThreads) {
  const int n = 1000;
  auto A = te::placeholder({n}, ir::Float(32), "A");
  auto B = te::placeholder({n}, ir::Float(32), "B");
  auto C = te::compute(
      {n}, [&](Var i) { return A(i) + B(i); }, "C");
  auto s = te::create_schedule({C});
  IterVar bx, tx;
  (*s)[C].split((*s)[C].axis(0), 128, &bx, &tx);
  (*s)[C].bind(bx, "blockIdx.x");
  (*s)[C].bind(tx, "threadIdx.x");
  ir::LoweredFunc f = lower::lower(*s, {A, B, C}, "vadd");

  auto args = testing::run_interp(f, testing::make_args(f, {{n}, {n}, {n}}, 3));
  for (int i = 0; i < n; ++i) ASSERT_EQ(f32(args[2])[i], f32(args[0])[i] + f32(args[1])[i]) << i;

  LaunchDims dims = launch_dims(f);
  EXPECT_EQ(dims.grid, (std::array<int64_t, 3>{8, 1, 1}));
  EXPECT_EQ(dims.block, (std::array<int64_t, 3>{128, 1, 1}));
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__(128) vadd("), std::string::npos) << src;
  EXPECT_NE(src.find("blockIdx.x"), std::string::npos) << src;
  EXPECT_NE(src.find("threadIdx.x"), std::string::npos) << src;
  expect_compiles_everywhere(f);
}

// C = A x B tiled over a 2-D grid of 8 x 8 blocks, tiles of A and B staged through shared memory
// by all threads of a block, with the barriers lowering inserts.
TEST(CudaCodegen, SharedMemoryTiledMatmulWithBarriers) {
  const int m = 16, n = 24, k = 12;
  auto A = te::placeholder({m, k}, ir::Float(32), "A");
  auto B = te::placeholder({k, n}, ir::Float(32), "B");
  auto r = te::reduce_axis(k, "k");
  auto C = te::compute(
      {m, n}, [&](Var i, Var j) { return te::sum(A(i, r) * B(r, j), {r}); }, "C");
  auto s = te::create_schedule({C});
  auto AS = s->cache_read(A, "shared", {C.op()});
  auto BS = s->cache_read(B, "shared", {C.op()});
  auto sc = (*s)[C];
  IterVar io, jo, ii, ji, ko, ki;
  sc.tile(sc.axis(0), sc.axis(1), 8, 8, &io, &jo, &ii, &ji);
  sc.split(sc.reduce_axis(0), 4, &ko, &ki);
  sc.reorder({io, jo, ii, ji, ko, ki});
  sc.bind(io, "blockIdx.y");
  sc.bind(jo, "blockIdx.x");
  sc.bind(ii, "threadIdx.y");
  sc.bind(ji, "threadIdx.x");
  for (const auto &t : {AS, BS}) {
    auto st = (*s)[t];
    st.compute_at(sc, ko);
    IterVar fused, fo, fi;
    st.fuse(st.axis(0), st.axis(1), &fused);
    st.split(fused, 8, &fo, &fi);
    st.bind(fi, "threadIdx.x");
  }
  ir::LoweredFunc f = lower::lower(*s, {A, B, C}, "matmul");

  ir::LoweredFunc phased = make_block_phases(f);
  for (const ir::LoweredFunc *g : {&f, &phased}) {
    auto args = testing::run_interp(*g, testing::make_args(*g, {{m, k}, {k, n}, {m, n}}, 5));
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double expect = 0;
        for (int kk = 0; kk < k; ++kk) expect += double(f32(args[0])[i * k + kk]) * f32(args[1])[kk * n + j];
        ASSERT_NEAR(f32(args[2])[i * n + j], expect, 1e-4) << i << "," << j << "\n" << *g;
      }
    }
  }

  LaunchDims dims = launch_dims(f);
  EXPECT_EQ(dims.grid, (std::array<int64_t, 3>{3, 2, 1}));
  EXPECT_EQ(dims.block, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(shared_memory_bytes(f), 2 * 8 * 4 * 4);
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("__shared__ __align__(16) float"), std::string::npos) << src;
  EXPECT_NE(src.find("__syncthreads();"), std::string::npos) << src;
  expect_compiles_everywhere(f);
}

// B[i] = sum_k A[i, k]: one block per row, each of 16 threads sums a strided slice of the row
// into shared memory (rfactor), and after a barrier the partial sums are added up.
TEST(CudaCodegen, CrossThreadReductionThroughSharedMemory) {
  const int rows = 5, cols = 64;
  auto A = te::placeholder({rows, cols}, ir::Float(32), "A");
  auto r = te::reduce_axis(cols, "k");
  auto B = te::compute(
      {rows}, [&](Var i) { return te::sum(A(i, r), {r}); }, "B");
  auto s = te::create_schedule({B});
  IterVar ko, ki;
  (*s)[B].split((*s)[B].reduce_axis(0), 16, &ko, &ki);
  auto BF = s->rfactor(B, ki);
  (*s)[BF].set_scope("shared");
  (*s)[B].bind((*s)[B].axis(0), "blockIdx.x");
  (*s)[BF].compute_at((*s)[B], (*s)[B].axis(0));
  (*s)[BF].bind((*s)[BF].axis(0), "threadIdx.x");
  ir::LoweredFunc f = lower::lower(*s, {A, B}, "row_sum");

  // The IR as lowered, and as the CUDA back end writes it: the final sum by thread 0 only, after
  // a barrier.
  ir::LoweredFunc phased = make_block_phases(f);
  for (const ir::LoweredFunc *g : {&f, &phased}) {
    auto args = testing::run_interp(*g, testing::make_args(*g, {{rows, cols}, {rows}}, 7));
    for (int i = 0; i < rows; ++i) {
      double expect = 0;
      for (int c = 0; c < cols; ++c) expect += f32(args[0])[i * cols + c];
      ASSERT_NEAR(f32(args[1])[i], expect, 1e-4) << i << "\n" << *g;
    }
  }

  LaunchDims dims = launch_dims(f);
  EXPECT_EQ(dims.grid, (std::array<int64_t, 3>{rows, 1, 1}));
  EXPECT_EQ(dims.block, (std::array<int64_t, 3>{16, 1, 1}));
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("__syncthreads();"), std::string::npos) << src;
  EXPECT_NE(src.find("if (threadIdx.x < 1) {"), std::string::npos) << src;
  expect_compiles_everywhere(f);
}

// B[i] = A[offset + stride * i], four consecutive outputs per thread as one vector store.
ir::LoweredFunc vector_copy(int n, int offset, int stride, ir::DataType t, const std::string &name) {
  auto A = te::placeholder({offset + stride * (n - 1) + 1}, t, "A");
  auto B = te::compute(
      {n}, [&](Var i) { return A(offset + stride * i); }, "B");
  auto s = te::create_schedule({B});
  IterVar outer, vec, bx, tx;
  (*s)[B].split((*s)[B].axis(0), 4, &outer, &vec);
  (*s)[B].split(outer, 8, &bx, &tx);
  (*s)[B].bind(bx, "blockIdx.x");
  (*s)[B].bind(tx, "threadIdx.x");
  (*s)[B].vectorize(vec);
  return lower::lower(*s, {A, B}, name);
}

// What the kernel copies, run by the interpreter: B against A read at offset + stride * i.
void expect_copies(const ir::LoweredFunc &f, int n, int offset, int stride) {
  const int len = offset + stride * (n - 1) + 1;
  for (const ir::LoweredFunc &g : {f, cuda_kernel_ir(f)}) {
    auto args = testing::run_interp(g, testing::make_args(g, {{len}, {n}}, 11));
    for (int i = 0; i < n; ++i) ASSERT_EQ(f32(args[1])[i], f32(args[0])[offset + stride * i]) << i;
  }
}

// A contiguous vector copy between aligned buffers at a multiple of its lanes is one float4 load
// and one float4 store.
TEST(CudaCodegen, AlignedContiguousVectorCopyIsOneFloat4Access) {
  ir::LoweredFunc f = vector_copy(256, 0, 1, ir::Float(32), "copy");
  expect_copies(f, 256, 0, 1);
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("*reinterpret_cast<float4*>(&B["), std::string::npos) << src;
  EXPECT_NE(src.find("*reinterpret_cast<const float4*>(&A["), std::string::npos) << src;
  EXPECT_EQ(src.find("lane"), std::string::npos) << src;
  expect_compiles_everywhere(f);
}

// 16-bit elements: four lanes are 8 bytes, one uint2 access.
TEST(CudaCodegen, Float16VectorCopyIsOneEightByteAccess) {
  ir::LoweredFunc f = vector_copy(64, 0, 1, ir::Float(16), "copy_f16");
  const std::string src = codegen_cuda(f);
  EXPECT_NE(src.find("*reinterpret_cast<uint2*>(&B["), std::string::npos) << src;
  expect_compiles_everywhere(f);
}

// A source one element off alignment, or read with a stride, is copied lane by lane.
TEST(CudaCodegen, UnalignedOrStridedVectorCopyStaysLaneByLane) {
  for (auto [offset, stride] : {std::pair{1, 1}, std::pair{0, 2}, std::pair{2, 1}}) {
    SCOPED_TRACE(detail::concat("offset ", offset, " stride ", stride));
    ir::LoweredFunc f = vector_copy(64, offset, stride, ir::Float(32), "copy_scalar");
    expect_copies(f, 64, offset, stride);
    const std::string src = codegen_cuda(f);
    EXPECT_EQ(src.find("float4"), std::string::npos) << src;
    EXPECT_NE(src.find("lane"), std::string::npos) << src;
    expect_compiles_everywhere(f);
  }
}

TEST(CudaTarget, ParsesTheArchitecture) {
  CudaTarget t = parse_cuda_target("cuda  -arch=sm_90");
  EXPECT_EQ(t.compute_capability, 90);
  EXPECT_EQ(t.arch(), "sm_90");
  EXPECT_EQ(t.target.str(), "cuda -arch=sm_90");
  EXPECT_EQ(parse_cuda_target("cuda --arch=sm_70").compute_capability, 70);
  EXPECT_EQ(nvrtc_options(parse_cuda_target("cuda -arch=sm_80")).front(), "--gpu-architecture=compute_80");
}

TEST(CudaTarget, RejectsWhatIsNotACudaTarget) {
  for (const char *bad : {"llvm -mcpu=znver4", "cuda", "cuda -arch=sm_", "cuda -arch=compute_80", "cuda -arch=sm_3x",
                          "cuda -arch=sm_35", "cuda -arch=sm_90 -arch=sm_80", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_cuda_target(bad), contracts::TargetError);
  }
  try {
    parse_cuda_target("llvm");
    FAIL() << "expected TargetError";
  } catch (const contracts::TargetError &e) {
    EXPECT_NE(std::string(e.what()).find("not a CUDA target"), std::string::npos) << e.what();
  }
}

// A launch the target cannot run is refused before NVRTC sees it.
TEST(CudaModuleTest, TooManyThreadsPerBlockIsAUserError) {
  auto A = te::placeholder({4096}, ir::Float(32), "A");
  auto C = te::compute(
      {4096}, [&](Var i) { return A(i) * 2.0f; }, "C");
  auto s = te::create_schedule({C});
  IterVar bx, tx;
  (*s)[C].split((*s)[C].axis(0), 2048, &bx, &tx);
  (*s)[C].bind(bx, "blockIdx.x");
  (*s)[C].bind(tx, "threadIdx.x");
  ir::LoweredFunc f = lower::lower(*s, {A, C}, "scale");
  try {
    CudaModule m(f, parse_cuda_target("cuda -arch=sm_80"));
    FAIL() << "expected UserError";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("2048 threads per block"), std::string::npos) << e.what();
  }
}

// A kernel has no heap: a local tile larger than the C back end's 64 KiB of stack is still an
// array of the thread (a random config of a float16 dense on an H200 once failed to compile
// because the source called the C back end's allocation-failure path), and one beyond a thread's
// 512 KiB of local memory is a UserError naming the allocation.
ir::LoweredFunc one_thread_local_tile(int64_t rows, int64_t cols) {
  auto A = te::placeholder({rows, cols}, ir::Float(32), "A");
  auto C = te::compute(
      {rows, cols}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "C");
  auto s = te::create_schedule({C});
  te::Tensor local = s->cache_write(C, "local");
  IterVar bo, bi;
  (*s)[C].split((*s)[C].axis(0), rows, &bo, &bi);
  (*s)[C].bind(bo, "blockIdx.x");
  (*s)[local].compute_at((*s)[C], bo);
  return lower::lower(*s, {A, C}, "tile");
}

TEST(CudaCodegen, ALocalTileIsAnArrayOfTheThreadUpToItsLocalMemory) {
  const ir::LoweredFunc big = one_thread_local_tile(256, 128);  // 128 KiB
  const std::string src = codegen_cuda(big);
  EXPECT_NE(src.find("__align__(16) float C_local[32768];"), std::string::npos) << src;
  EXPECT_EQ(src.find("malloc"), std::string::npos) << src;
  EXPECT_EQ(src.find("kiln_error"), std::string::npos) << src;
  try {
    codegen_cuda(one_thread_local_tile(1024, 256));  // 1 MiB
    ADD_FAILURE() << "a 1 MiB local tile was written";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("the local allocation C.local takes 1048576 bytes, more than the 524288"),
              std::string::npos)
        << e.what();
  }
  // The C back end keeps its heap for the same tile.
  EXPECT_NE(codegen_c(big).find("malloc"), std::string::npos);
  if (!nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  const CudaModule m(big, parse_cuda_target("cuda -arch=sm_90"));
  EXPECT_NE(m.ptx().find(".entry tile"), std::string::npos);
}

// 128 threads in z are few in all but more than the 64 a CUDA block has in z: the driver refused
// such a launch of a random conv2d config on an H200 (CUDA_ERROR_INVALID_VALUE). Refused here
// first, naming the axis.
TEST(CudaModuleTest, MoreThreadsInZThanABlockHasIsAUserError) {
  auto A = te::placeholder({4, 128}, ir::Float(32), "A");
  auto C = te::compute(
      {4, 128}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "C");
  auto s = te::create_schedule({C});
  (*s)[C].bind((*s)[C].axis(0), "blockIdx.x");
  (*s)[C].bind((*s)[C].axis(1), "threadIdx.z");
  ir::LoweredFunc f = lower::lower(*s, {A, C}, "scale");
  try {
    CudaModule m(f, parse_cuda_target("cuda -arch=sm_90"));
    FAIL() << "expected UserError";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("128 threads in threadIdx.z, more than the 64 a CUDA block has in z"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaModuleTest, UnknownThreadTagIsAUserError) {
  ir::LoweredFunc f;
  f.name = "warp";
  f.body = ir::ForNode::make(Var("w", ir::Int(32)), 0, 32, ir::ForKind::ThreadBinding, ir::make_nop(), "warpIdx.x");
  try {
    codegen_cuda(f);
    FAIL() << "expected UserError";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("cannot bind a loop to 'warpIdx.x'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::codegen
