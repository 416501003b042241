// Runs the kernels cuda_kernels_gen wrote on a GPU. It depends on nothing of Kiln: the driver API
// is loaded with dlopen("libcuda.so.1") and its few types are declared here, as
// rpc_server/cuda_backend.cpp does, so that it builds with g++ alone:
//
//   g++ -std=c++17 -O2 -o cuda_harness cuda_harness.cpp -ldl
//   ./cuda_harness <folder> [repeats]      times the kernels of manifest.txt
//   ./cuda_harness --check <folder>        runs the kernels of check.txt against their expected outputs
//
// Timing: each kernel's parameters are filled with random values in [-1, 1) (float32 or float16);
// the kernel is launched once to warm up and once timed alone, then as many times as fill about
// 50 ms (at least once, at most `repeats`, 100 by default) between two CUDA events. One line per
// kernel: "cuda_harness <name> ms=<mean ms> gflops=<GFLOPS>", or "cuda_harness <name> error=..."
// for a kernel the driver refused to load or launch.
//
// Checking: the inputs are read from their files, the outputs zeroed, the kernel launched once and
// its outputs compared with the expected ones: "check <case>@<k> max_diff=<d> PASS|FAIL", then a
// summary line "check total=<n> passed=<p> failed=<f>". The exit status is 1 if any failed.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUevent_st;
struct CUstream_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUevent = CUevent_st *;
using CUstream = CUstream_st *;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char **);
};

void *handle = nullptr;

template <typename F>
void load(F &f, const char *name) {
  f = reinterpret_cast<F>(::dlsym(handle, name));
  if (f == nullptr) {
    std::fprintf(stderr, "cuda_harness: the driver has no %s\n", name);
    std::exit(1);
  }
}

Driver d;

void check(CUresult r, const char *what) {
  if (r == 0) return;
  const char *name = nullptr;
  if (d.cuGetErrorName != nullptr) d.cuGetErrorName(r, &name);
  std::fprintf(stderr, "cuda_harness: %s: %s (%d)\n", what, name != nullptr ? name : "CUDA error", r);
  std::exit(1);
}

// A driver error as text ("CUDA_ERROR_...: (code)").
std::string error_text(CUresult r) {
  const char *name = nullptr;
  if (d.cuGetErrorName != nullptr) d.cuGetErrorName(r, &name);
  return std::string(name != nullptr ? name : "CUDA error") + " (" + std::to_string(r) + ")";
}

struct Param {
  std::string dtype;  // f32 or f16
  size_t bytes = 0;
  bool output = false;
  std::string file;  // check.txt: the input, or the expected output
};

struct Kernel {
  std::string name, ptx_file, entry;
  unsigned grid[3], block[3];
  double flop = 0, tolerance = 0;
  std::vector<Param> params;
};

std::ifstream open_or_exit(const std::string &path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cuda_harness: no %s (run cuda_kernels_gen first)\n", path.c_str());
    std::exit(1);
  }
  return in;
}

void malformed(const std::string &line) {
  std::fprintf(stderr, "cuda_harness: malformed line: %s\n", line.c_str());
  std::exit(1);
}

// The kernels of a file, one per non-empty line, each read by `parse` (false: malformed).
template <typename Parse>
std::vector<Kernel> read_kernels(const std::string &path, Parse parse) {
  std::ifstream in = open_or_exit(path);
  std::vector<Kernel> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream s(line);
    Kernel k;
    if (!parse(s, k) || !s) malformed(line);
    out.push_back(k);
  }
  return out;
}

// <ptx> <entry> <grid x3> <block x3>
void read_launch(std::istringstream &s, Kernel &k) {
  s >> k.ptx_file >> k.entry >> k.grid[0] >> k.grid[1] >> k.grid[2] >> k.block[0] >> k.block[1] >> k.block[2];
}

bool known_dtype(const std::string &d) { return d == "f32" || d == "f16"; }

// manifest.txt: <name> <ptx> <entry> <grid x3> <block x3> <flop> <n> <dtype:bytes> x n
std::vector<Kernel> read_manifest(const std::string &dir) {
  return read_kernels(dir + "/manifest.txt", [](std::istringstream &s, Kernel &k) {
    size_t params = 0;
    s >> k.name;
    read_launch(s, k);
    s >> k.flop >> params;
    if (!s || params > 64) return false;
    k.params.resize(params);
    for (Param &p : k.params) {
      std::string field;
      s >> field;
      const size_t colon = field.find(':');
      if (colon == std::string::npos) return false;
      p.dtype = field.substr(0, colon);
      p.bytes = std::strtoull(field.c_str() + colon + 1, nullptr, 10);
      if (!known_dtype(p.dtype)) return false;
    }
    return true;
  });
}

// check.txt: <case> <k> <ptx> <entry> <grid x3> <block x3> <tolerance> <n> (<in|out> <dtype> <bytes> <file>) x n
std::vector<Kernel> read_checks(const std::string &dir) {
  return read_kernels(dir + "/check.txt", [](std::istringstream &s, Kernel &k) {
    std::string index;
    size_t params = 0;
    s >> k.name >> index;
    read_launch(s, k);
    s >> k.tolerance >> params;
    if (!s || params > 64) return false;
    k.name += "@" + index;
    k.params.resize(params);
    for (Param &p : k.params) {
      std::string role;
      s >> role >> p.dtype >> p.bytes >> p.file;
      p.output = role == "out";
      if ((role != "in" && role != "out") || !known_dtype(p.dtype)) return false;
    }
    return true;
  });
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Values of a grid of 1/64 in [-1, 1), which float16 holds exactly.
uint16_t grid_half(int i) {  // i in [0, 128): (i - 64) / 64
  const int v = i - 64;
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int a = v < 0 ? -v : v, e = 0;  // a / 64 = 2^(e) * 1.m
  while ((a >> e) > 1) ++e;
  const int mant = (a << (10 - e)) & 0x3ff;  // exact: a has at most 7 bits
  return static_cast<uint16_t>(sign | ((e - 6 + 15) << 10) | mant);
}

struct Loaded {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

// Loads the kernel's PTX; on failure prints the error on the kernel's line and returns false.
bool load_kernel(const std::string &dir, const Kernel &k, const char *tag, Loaded *out) {
  std::ifstream f(dir + "/" + k.ptx_file);
  std::stringstream ptx;
  ptx << f.rdbuf();
  CUresult r = d.cuModuleLoadData(&out->module, ptx.str().c_str());
  if (r == 0) r = d.cuModuleGetFunction(&out->function, out->module, k.entry.c_str());
  if (r != 0) {
    std::printf("%s %s error=load:%s\n", tag, k.name.c_str(), error_text(r).c_str());
    return false;
  }
  return true;
}

CUresult launch(const Loaded &l, const Kernel &k, std::vector<void *> &args) {
  return d.cuLaunchKernel(l.function, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], 0, nullptr,
                          args.data(), nullptr);
}

// The driver's errors that leave the context unusable: the harness cannot go on after one.
bool sticky(CUresult r) { return r == 700 || r == 714 || r == 715 || r == 716 || r == 719 || r == 702; }

int time_kernels(const std::string &dir, int max_repeats) {
  const std::vector<Kernel> kernels = read_manifest(dir);
  CUevent start = nullptr, stop = nullptr;
  check(d.cuEventCreate(&start, 0), "cuEventCreate");
  check(d.cuEventCreate(&stop, 0), "cuEventCreate");
  std::mt19937 rng(1);
  for (const Kernel &k : kernels) {
    Loaded l;
    if (!load_kernel(dir, k, "cuda_harness", &l)) continue;
    std::vector<CUdeviceptr> ptrs(k.params.size());
    std::vector<void *> args(k.params.size());
    for (size_t i = 0; i < k.params.size(); ++i) {
      const Param &p = k.params[i];
      std::vector<char> host(p.bytes);
      if (p.dtype == "f16") {
        for (size_t j = 0; j + 1 < p.bytes; j += 2) {
          const uint16_t h = grid_half(static_cast<int>(rng() % 128));
          std::memcpy(&host[j], &h, 2);
        }
      } else {
        for (size_t j = 0; j + 3 < p.bytes; j += 4) {
          const float v = static_cast<float>(rng() % 128) / 64.0f - 1.0f;
          std::memcpy(&host[j], &v, 4);
        }
      }
      check(d.cuMemAlloc(&ptrs[i], p.bytes), "cuMemAlloc");
      check(d.cuMemcpyHtoD(ptrs[i], host.data(), p.bytes), "cuMemcpyHtoD");
      args[i] = &ptrs[i];
    }
    auto timed = [&](int n, float *ms) {
      CUresult r = d.cuEventRecord(start, nullptr);
      for (int i = 0; i < n && r == 0; ++i) r = launch(l, k, args);
      if (r == 0) r = d.cuEventRecord(stop, nullptr);
      if (r == 0) r = d.cuEventSynchronize(stop);
      if (r == 0) r = d.cuEventElapsedTime(ms, start, stop);
      return r;
    };
    float ms = 0;
    CUresult r = launch(l, k, args);
    if (r == 0) r = d.cuCtxSynchronize();
    if (r == 0) r = timed(1, &ms);
    if (r == 0) {
      const int n = std::max(1, std::min(max_repeats, static_cast<int>(50.0 / std::max(ms, 1e-3f))));
      r = timed(n, &ms);
      if (r == 0) {
        const double mean_ms = ms / n;
        std::printf("cuda_harness %s ms=%.4f gflops=%.1f\n", k.name.c_str(), mean_ms, k.flop / (mean_ms * 1e-3) / 1e9);
      }
    }
    if (r != 0) std::printf("cuda_harness %s error=%s\n", k.name.c_str(), error_text(r).c_str());
    std::fflush(stdout);
    if (sticky(r)) {
      std::fprintf(stderr, "cuda_harness: the context is lost after %s\n", k.name.c_str());
      return 1;
    }
    for (CUdeviceptr p : ptrs) d.cuMemFree(p);
    d.cuModuleUnload(l.module);
  }
  return 0;
}

std::vector<char> read_bytes(const std::string &path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> out(bytes);
  if (!in.read(out.data(), static_cast<std::streamsize>(bytes))) {
    std::fprintf(stderr, "cuda_harness: cannot read %zu bytes from %s\n", bytes, path.c_str());
    std::exit(1);
  }
  return out;
}

double value_at(const std::vector<char> &b, const std::string &dtype, size_t i) {
  if (dtype == "f16") {
    uint16_t h;
    std::memcpy(&h, &b[2 * i], 2);
    return half_to_float(h);
  }
  float f;
  std::memcpy(&f, &b[4 * i], 4);
  return f;
}

int check_kernels(const std::string &dir) {
  const std::vector<Kernel> kernels = read_checks(dir);
  int passed = 0, failed = 0;
  for (const Kernel &k : kernels) {
    Loaded l;
    if (!load_kernel(dir, k, "check", &l)) {
      ++failed;
      continue;
    }
    std::vector<CUdeviceptr> ptrs(k.params.size());
    std::vector<void *> args(k.params.size());
    for (size_t i = 0; i < k.params.size(); ++i) {
      const Param &p = k.params[i];
      check(d.cuMemAlloc(&ptrs[i], p.bytes), "cuMemAlloc");
      if (p.output) {
        check(d.cuMemsetD8(ptrs[i], 0, p.bytes), "cuMemsetD8");
      } else {
        const std::vector<char> host = read_bytes(dir + "/" + p.file, p.bytes);
        check(d.cuMemcpyHtoD(ptrs[i], host.data(), p.bytes), "cuMemcpyHtoD");
      }
      args[i] = &ptrs[i];
    }
    CUresult r = launch(l, k, args);
    if (r == 0) r = d.cuCtxSynchronize();
    double worst = 0;
    if (r == 0) {
      for (size_t i = 0; i < k.params.size() && r == 0; ++i) {
        const Param &p = k.params[i];
        if (!p.output) continue;
        std::vector<char> got(p.bytes);
        r = d.cuMemcpyDtoH(got.data(), ptrs[i], p.bytes);
        const std::vector<char> expect = read_bytes(dir + "/" + p.file, p.bytes);
        const size_t n = p.bytes / (p.dtype == "f16" ? 2 : 4);
        for (size_t j = 0; j < n && r == 0; ++j) {
          const double a = value_at(got, p.dtype, j), b = value_at(expect, p.dtype, j);
          const double diff = std::isnan(a) != std::isnan(b) ? INFINITY : (std::isnan(a) ? 0 : std::fabs(a - b));
          worst = std::max(worst, diff);
        }
      }
    }
    if (r != 0) {
      std::printf("check %s error=%s FAIL\n", k.name.c_str(), error_text(r).c_str());
      ++failed;
    } else {
      const bool ok = worst <= k.tolerance;
      std::printf("check %s max_diff=%.3g %s\n", k.name.c_str(), worst, ok ? "PASS" : "FAIL");
      ++(ok ? passed : failed);
    }
    std::fflush(stdout);
    if (sticky(r)) {
      std::fprintf(stderr, "cuda_harness: the context is lost after %s\n", k.name.c_str());
      break;
    }
    for (CUdeviceptr p : ptrs) d.cuMemFree(p);
    d.cuModuleUnload(l.module);
  }
  std::printf("check total=%zu passed=%d failed=%d\n", kernels.size(), passed, failed);
  return failed == 0 && passed == static_cast<int>(kernels.size()) ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  const bool checking = argc == 3 && std::string(argv[1]) == "--check";
  if (argc < 2 || argc > 3 || (argc == 3 && !checking && std::atoi(argv[2]) < 1)) {
    std::fprintf(stderr, "usage: %s <folder> [repeats] | %s --check <folder>\n", argv[0], argv[0]);
    return 2;
  }
  handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "cuda_harness: no CUDA driver on this host: libcuda.so.1 not found\n");
    return 1;
  }
  load(d.cuGetErrorName, "cuGetErrorName");
  load(d.cuInit, "cuInit");
  load(d.cuDeviceGet, "cuDeviceGet");
  load(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  load(d.cuCtxSynchronize, "cuCtxSynchronize");
  load(d.cuModuleLoadData, "cuModuleLoadData");
  load(d.cuModuleGetFunction, "cuModuleGetFunction");
  load(d.cuModuleUnload, "cuModuleUnload");
  load(d.cuLaunchKernel, "cuLaunchKernel");
  load(d.cuMemAlloc, "cuMemAlloc_v2");
  load(d.cuMemFree, "cuMemFree_v2");
  load(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  load(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  load(d.cuMemsetD8, "cuMemsetD8_v2");
  load(d.cuEventCreate, "cuEventCreate");
  load(d.cuEventRecord, "cuEventRecord");
  load(d.cuEventSynchronize, "cuEventSynchronize");
  load(d.cuEventElapsedTime, "cuEventElapsedTime");
  check(d.cuInit(0), "cuInit");
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (checking) return check_kernels(argv[2]);
  return time_kernels(argv[1], argc == 3 ? std::atoi(argv[2]) : 100);
}
