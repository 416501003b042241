#pragma once
// Compiling CUDA C source to PTX with NVRTC, the CUDA runtime compiler. Needs only the CUDA
// toolkit's NVRTC library, not a GPU or a driver. Kiln builds without CUDA too; then
// nvrtc_available() is false and compile_cuda_to_ptx throws.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen {

// NVRTC rejected the source (log() holds the compiler's messages), or NVRTC is unavailable.
class NvrtcError : public std::runtime_error {
 public:
  NvrtcError(const std::string &message, std::string log)
      : std::runtime_error(message), log_(std::move(log)) {}
  const std::string &log() const { return log_; }

 private:
  std::string log_;
};

// Whether this build of Kiln includes NVRTC.
bool nvrtc_available();

// NVRTC's version as "MAJOR.MINOR", or "" without NVRTC.
std::string nvrtc_version();

// Compiles `source` to PTX. `program_name` names the source in messages ("axpy.cu");
// `options` are NVRTC options, for example {"--gpu-architecture=compute_90", "-default-device"}.
// Throws NvrtcError, with NVRTC's log, when compilation fails.
std::string compile_cuda_to_ptx(const std::string &source, const std::string &program_name,
                                const std::vector<std::string> &options = {});

}  // namespace kiln::codegen
