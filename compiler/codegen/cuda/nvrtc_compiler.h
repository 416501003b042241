#pragma once
// Compiling CUDA C source to PTX with NVRTC, the CUDA runtime compiler. Needs only the CUDA
// toolkit's NVRTC library, not a GPU or a driver. Kiln builds without CUDA too; then
// nvrtc_available() is false and compile_cuda_to_ptx throws.
#include <string>
#include <utility>
#include <vector>

#include "contracts/error.h"

namespace kiln::codegen {

// NVRTC rejected the source it was given (log() holds the compiler's messages), or this build of
// Kiln has no NVRTC: either way the caller's request cannot be served as asked.
class NvrtcError : public UserError {
 public:
  NvrtcError(const std::string &message, std::string log) : UserError(message), log_(std::move(log)) {}
  const std::string &log() const { return log_; }

 private:
  std::string log_;
};

// Whether this build of Kiln includes NVRTC.
bool nvrtc_available();

// NVRTC's version as "MAJOR.MINOR", or "" without NVRTC.
std::string nvrtc_version();

// The compute capabilities this NVRTC compiles for (75, 80, ..., each major * 10 + minor),
// ascending; empty without NVRTC. Toolkits drop old architectures: CUDA 13 has no sm_70.
std::vector<int> nvrtc_supported_archs();

// The CUDA toolkit's include directories found when Kiln was built (those that still exist), for
// the headers a kernel includes (cuda_fp16.h); empty without NVRTC.
std::vector<std::string> nvrtc_include_dirs();

// Whether cuda_fp16.h is in nvrtc_include_dirs(): float16 kernels compile only then.
bool nvrtc_has_fp16_header();

// Compiles `source` to PTX. `program_name` names the source in messages ("axpy.cu");
// `options` are NVRTC options, for example {"--gpu-architecture=compute_90", "-default-device"}.
// Throws NvrtcError, with NVRTC's log, when compilation fails.
std::string compile_cuda_to_ptx(const std::string &source, const std::string &program_name,
                                const std::vector<std::string> &options = {});

}  // namespace kiln::codegen
