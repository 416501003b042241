// Runs the kernels cuda_kernels_gen wrote on a GPU and prints their GFLOPS. It depends on nothing
// of Kiln: the driver API is loaded with dlopen("libcuda.so.1") and its few types are declared
// here, as rpc_server/cuda_backend.cpp does, so that it builds with g++ alone:
//
//   g++ -std=c++17 -O2 -o cuda_harness cuda_harness.cpp -ldl
//   ./cuda_harness <folder> [repeats]
//
// Each kernel's parameters are filled with random float32 values in [-1, 1); the kernel is
// launched once to warm up, then `repeats` times (100 by default) between two CUDA events. One
// line per kernel: "cuda_harness <name> ms=<mean ms> gflops=<GFLOPS>".
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
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

struct Kernel {
  std::string name, ptx_file, entry;
  unsigned grid[3], block[3];
  double flop = 0;
  std::vector<size_t> bytes;
};

std::vector<Kernel> read_manifest(const std::string &dir) {
  std::ifstream in(dir + "/manifest.txt");
  if (!in) {
    std::fprintf(stderr, "cuda_harness: no %s/manifest.txt (run cuda_kernels_gen first)\n", dir.c_str());
    std::exit(1);
  }
  std::vector<Kernel> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream s(line);
    Kernel k;
    size_t params = 0;
    s >> k.name >> k.ptx_file >> k.entry >> k.grid[0] >> k.grid[1] >> k.grid[2] >> k.block[0] >> k.block[1] >>
        k.block[2] >> k.flop >> params;
    k.bytes.resize(params);
    for (auto &b : k.bytes) s >> b;
    if (!s) {
      std::fprintf(stderr, "cuda_harness: malformed manifest line: %s\n", line.c_str());
      std::exit(1);
    }
    out.push_back(k);
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s <folder> [repeats]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int repeats = argc == 3 ? std::atoi(argv[2]) : 100;
  const std::vector<Kernel> kernels = read_manifest(dir);
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
  load(d.cuLaunchKernel, "cuLaunchKernel");
  load(d.cuMemAlloc, "cuMemAlloc_v2");
  load(d.cuMemFree, "cuMemFree_v2");
  load(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
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
  CUevent start = nullptr, stop = nullptr;
  check(d.cuEventCreate(&start, 0), "cuEventCreate");
  check(d.cuEventCreate(&stop, 0), "cuEventCreate");

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Kernel &k : kernels) {
    std::ifstream f(dir + "/" + k.ptx_file);
    std::stringstream ptx;
    ptx << f.rdbuf();
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    check(d.cuModuleLoadData(&module, ptx.str().c_str()), "cuModuleLoadData");
    check(d.cuModuleGetFunction(&function, module, k.entry.c_str()), "cuModuleGetFunction");
    std::vector<CUdeviceptr> ptrs(k.bytes.size());
    std::vector<void *> args(k.bytes.size());
    for (size_t i = 0; i < k.bytes.size(); ++i) {
      std::vector<float> host(k.bytes[i] / sizeof(float));
      for (float &x : host) x = uniform(rng);
      check(d.cuMemAlloc(&ptrs[i], k.bytes[i]), "cuMemAlloc");
      check(d.cuMemcpyHtoD(ptrs[i], host.data(), k.bytes[i]), "cuMemcpyHtoD");
      args[i] = &ptrs[i];
    }
    auto launch = [&] {
      check(d.cuLaunchKernel(function, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], 0, nullptr,
                             args.data(), nullptr),
            "cuLaunchKernel");
    };
    launch();
    check(d.cuCtxSynchronize(), k.name.c_str());
    check(d.cuEventRecord(start, nullptr), "cuEventRecord");
    for (int r = 0; r < repeats; ++r) launch();
    check(d.cuEventRecord(stop, nullptr), "cuEventRecord");
    check(d.cuEventSynchronize(stop), k.name.c_str());
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    const double mean_ms = ms / repeats;
    std::printf("cuda_harness %s ms=%.4f gflops=%.1f\n", k.name.c_str(), mean_ms, k.flop / (mean_ms * 1e-3) / 1e9);
    std::fflush(stdout);
    for (CUdeviceptr p : ptrs) d.cuMemFree(p);
  }
  return 0;
}
