#pragma once
// The CUDA back end: a lowered function whose loops are bound to GPU threads (ForKind::
// ThreadBinding with a thread tag) as one CUDA C kernel, `extern "C" __global__ void <name>(...)`,
// and that kernel compiled to PTX with NVRTC for a target `cuda -arch=sm_XX`.
//
// The kernel takes the data pointers of f.params, then f.size_vars, in that order. Its launch
// dimensions come from the bound loops: the grid from the blockIdx.* loops, the block from the
// threadIdx.* loops, each the largest constant extent bound to that tag. A bound loop becomes the
// thread's index (guarded where the loop is shorter than the launch); a threadIdx loop that
// appears at several places of a block is one phase of the block's threads per place, the phases
// separated by the IR's sync_threads barriers (`__syncthreads()`), which is what the interpreter
// simulates. Virtual threads (vthread) are interleaved in each thread (inject_virtual_threads).
// A serial loop of constant extent under the kUnrollPragma pragma is written under
// `#pragma unroll`. Allocations in scope "shared" are `__shared__` arrays, "local" ones per-thread
// arrays, both aligned to 16 bytes. A vector copy `dst[ramp(i, 1, n)] = src[ramp(j, 1, n)]` between aligned
// buffers (kernel parameters, whose memory the runtime allocates aligned, and shared and local
// arrays) with i and j multiples of n is one access of a CUDA vector type (float4, float2; uint4,
// uint2, uint32_t for 16-bit elements) where n lanes fill one (2 or 4 of 32 bits, 2, 4 or 8 of
// 16). Other vectors are written lane by lane. float16 is cuda_fp16.h's __half, computed in half
// precision where the target has it (see codegen_cuda). The walk over the IR is the C back end's
// (compiler/codegen/c/codegen_c.h), whose hooks this generator overrides.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "contracts/target.h"

namespace kiln::codegen {

// The pragma (te::Stage::pragma, value 1) that leaves a loop to the CUDA compiler to unroll: the
// loop stays a loop in the IR, and the kernel writes it under `#pragma unroll`.
constexpr const char *kUnrollPragma = "unroll";

// A CUDA target: `cuda -arch=sm_XX`, XX the compute capability (major * 10 + minor).
struct CudaTarget {
  contracts::Target target;
  int compute_capability = 0;  // 70 for sm_70, 90 for sm_90
  int max_threads_per_block = 1024;
  int64_t max_shared_bytes_per_block = 48 * 1024;

  // "sm_90"
  std::string arch() const;
  // Whether the architecture computes in half precision (sm_53 and newer): float16 kernels then
  // compute in __half, older ones in float.
  bool has_half_arithmetic() const;
};

// Parses a CUDA target string through the target grammar (contracts/target.h). Throws
// contracts::TargetError for a malformed string, a kind other than "cuda", or an -arch that is
// missing or not sm_XX with XX >= 50.
CudaTarget parse_cuda_target(const std::string &text);

// The launch of a kernel: grid (blockIdx x, y, z) and block (threadIdx x, y, z) extents.
struct LaunchDims {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
};

// The launch dimensions of f's bound loops. Throws UserError for a bound loop whose extent is not
// a constant, or a thread tag other than blockIdx.[xyz], threadIdx.[xyz] and vthread.
LaunchDims launch_dims(const ir::LoweredFunc &f);

// f with the interpreter's order of a block made explicit for CUDA, where every thread of a block
// runs the whole kernel: work outside the threadIdx loops of a launched axis (a statement the
// interpreter runs once) is put in loops of extent 1 bound to those axes, which only thread 0 of
// each runs, and a sync_threads barrier separates each phase that threads share from the next
// (and ends each iteration of a loop around threadIdx loops). The interpreter computes the same
// with and without the rewrite. Throws UserError where a needed barrier would be reached by only
// some threads of the block.
ir::LoweredFunc make_block_phases(const ir::LoweredFunc &f);

// f with each vthread loop interleaved, as the kernel runs it: every allocation inside the loop
// becomes one copy per virtual thread (n times the elements, each load and store offset to its
// thread's copy), and the loop is pushed inside every loop, let and condition that does not
// depend on it, down to the statements that do, which are written once per virtual thread, one
// after the other (the loads and stores of virtual threads 0, 1, ... adjacent in the innermost
// loop). A barrier or other statement without effect that does not depend on the virtual thread
// stays once. This relies on what a virtual thread is: one of several independent copies of the
// work, none reading what another writes; the interpreter computes the same with and without the
// rewrite for such loops. A loop whose extent is not a constant, or whose allocations are not of
// constant size, stays a serial loop.
ir::LoweredFunc inject_virtual_threads(const ir::LoweredFunc &f);

// The function the CUDA kernel is written from: inject_virtual_threads(make_block_phases(f)).
ir::LoweredFunc cuda_kernel_ir(const ir::LoweredFunc &f);

// The CUDA C source of f: one kernel named after f (its name made an identifier). Throws UserError
// for a function CUDA cannot run as written (see launch_dims; a barrier inside a thread loop that
// is shorter than the launch, which only part of the block would reach).
// With half_compute (the default, which every architecture from sm_53 has), float16 is stored as
// cuda_fp16.h's __half and computed in half precision: + - * / min max and comparisons as
// __hadd ... __hmax, a float16 product added to a value as one __hfma, casts as
// __float2half_rn / __half2float, other operations and math functions in float rounded to half;
// the source then includes cuda_fp16.h. Without it float16 is stored as 16 bits and computed in
// float, as in the C back end.
std::string codegen_cuda(const ir::LoweredFunc &f, bool half_compute = true);

// A lowered function compiled for one CUDA target: source, PTX and launch.
class CudaModule {
 public:
  // Generates the source and compiles it with NVRTC for target.arch(). float16 is computed in
  // half precision where the target has it and NVRTC finds cuda_fp16.h (nvrtc_has_fp16_header),
  // otherwise in float (see codegen_cuda). Throws UserError when the
  // function needs more threads per block or more shared memory than the target has, NvrtcError
  // (a UserError) when this build has no NVRTC, its NVRTC does not support the architecture, or
  // NVRTC rejects the source.
  CudaModule(const ir::LoweredFunc &f, const CudaTarget &target);

  const std::string &get_source() const { return source_; }
  const std::string &ptx() const { return ptx_; }
  // The kernel's symbol in the PTX.
  const std::string &entry_name() const { return entry_; }
  const LaunchDims &launch() const { return launch_; }
  // Bytes of the kernel's static shared allocations.
  int64_t shared_bytes() const { return shared_bytes_; }
  const CudaTarget &target() const { return target_; }

 private:
  CudaTarget target_;
  std::string entry_;
  std::string source_;
  std::string ptx_;
  LaunchDims launch_;
  int64_t shared_bytes_ = 0;
};

// The bytes of the "shared" allocations of f's kernel (with a copy per virtual thread, see
// inject_virtual_threads), all counted as live at once. Throws UserError for a
// shared allocation whose size is not a constant.
int64_t shared_memory_bytes(const ir::LoweredFunc &f);

// The NVRTC options that compile for `target`: PTX for compute_XX, device functions by default,
// and the toolkit's include directories (nvrtc_include_dirs) for cuda_fp16.h.
std::vector<std::string> nvrtc_options(const CudaTarget &target);

}  // namespace kiln::codegen
