#include "compiler/codegen/cuda/nvrtc_compiler.h"

#include <filesystem>
#include <system_error>

#if KILN_HAVE_CUDA
#include <nvrtc.h>
#endif

namespace kiln::codegen {

#if KILN_HAVE_CUDA

namespace {

void check(nvrtcResult rc, const std::string &what) {
  if (rc != NVRTC_SUCCESS) {
    throw NvrtcError("nvrtc: " + what + ": " + nvrtcGetErrorString(rc), "");
  }
}

// Destroys the program on every exit path.
class Program {
 public:
  Program(const std::string &source, const std::string &name) {
    check(nvrtcCreateProgram(&program_, source.c_str(), name.c_str(), 0, nullptr, nullptr), "creating program " + name);
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() { nvrtcDestroyProgram(&program_); }

  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    if (nvrtcGetProgramLogSize(program_, &size) != NVRTC_SUCCESS || size == 0) return {};
    std::string log(size, '\0');
    if (nvrtcGetProgramLog(program_, log.data()) != NVRTC_SUCCESS) return {};
    log.resize(log.find('\0') == std::string::npos ? log.size() : log.find('\0'));
    return log;
  }

 private:
  nvrtcProgram program_ = nullptr;
};

}  // namespace

bool nvrtc_available() { return true; }

std::string nvrtc_version() {
  int major = 0;
  int minor = 0;
  check(nvrtcVersion(&major, &minor), "reading the version");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> nvrtc_supported_archs() {
  int count = 0;
  check(nvrtcGetNumSupportedArchs(&count), "counting the supported architectures");
  std::vector<int> archs(static_cast<size_t>(count));
  if (count > 0) check(nvrtcGetSupportedArchs(archs.data()), "listing the supported architectures");
  return archs;
}

std::vector<std::string> nvrtc_include_dirs() {
#ifdef KILN_CUDA_INCLUDE_DIRS
  const std::string all = KILN_CUDA_INCLUDE_DIRS;
#else
  const std::string all;
#endif
  std::vector<std::string> dirs;
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find('|', start);
    if (end == std::string::npos) end = all.size();
    std::string dir = all.substr(start, end - start);
    std::error_code ec;
    if (!dir.empty() && std::filesystem::is_directory(dir, ec)) dirs.push_back(std::move(dir));
    start = end + 1;
  }
  return dirs;
}

bool nvrtc_has_fp16_header() {
  for (const std::string &dir : nvrtc_include_dirs()) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(dir) / "cuda_fp16.h", ec)) return true;
  }
  return false;
}

std::string compile_cuda_to_ptx(const std::string &source, const std::string &program_name,
                                const std::vector<std::string> &options) {
  Program program(source, program_name);
  std::vector<const char *> option_ptrs;
  option_ptrs.reserve(options.size());
  for (const std::string &option : options) option_ptrs.push_back(option.c_str());

  nvrtcResult rc = nvrtcCompileProgram(program.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (rc != NVRTC_SUCCESS) {
    std::string log = program.log();
    throw NvrtcError("nvrtc: compiling " + program_name + " failed (" + nvrtcGetErrorString(rc) + "):\n" + log, log);
  }
  size_t size = 0;
  check(nvrtcGetPTXSize(program.get(), &size), "reading the PTX size of " + program_name);
  std::string ptx(size, '\0');
  check(nvrtcGetPTX(program.get(), ptx.data()), "reading the PTX of " + program_name);
  // The size counts the terminating NUL.
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

#else  // !KILN_HAVE_CUDA

bool nvrtc_available() { return false; }

std::string nvrtc_version() { return {}; }

std::vector<int> nvrtc_supported_archs() { return {}; }

std::vector<std::string> nvrtc_include_dirs() { return {}; }

bool nvrtc_has_fp16_header() { return false; }

std::string compile_cuda_to_ptx(const std::string & /*source*/, const std::string &program_name,
                                const std::vector<std::string> & /*options*/) {
  throw NvrtcError("nvrtc: cannot compile " + program_name + ": this build of Kiln has no CUDA toolkit (NVRTC)", "");
}

#endif  // KILN_HAVE_CUDA

}  // namespace kiln::codegen
