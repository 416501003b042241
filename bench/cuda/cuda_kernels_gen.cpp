// Writes Kiln's default-config CUDA kernels for the GPU benchmark shapes into a folder, for the
// standalone harness (cuda_harness.cpp) to run on a machine with a GPU: dense 1024x1024x1024
// float32 and the 3x3 convolutions of ResNet-18 at batch 1. For each kernel <name>.ptx, and one
// line of manifest.txt:
//   <name> <ptx file> <entry> <grid x y z> <block x y z> <flop> <params> <bytes of each param>
// Parameters are float32 buffers in the kernel's order (inputs, then the output).
//
//   cuda_kernels_gen <folder> [target]     (target: "cuda -arch=sm_90" when not given)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/codegen/cuda/codegen_cuda.h"
#include "compiler/driver/target.h"
#include "compiler/ir/error.h"
#include "compiler/ir/op.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"

namespace {

using kiln::contracts::Json;

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

struct Shape {
  std::string name, templ;
  Json args;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out = {
      {"dense_1024", "dense.cuda", Json::object({{"data", tensor({1024, 1024})}, {"weight", tensor({1024, 1024})}})}};
  // ResNet-18's 3x3 convolutions: input channels, size, output channels, stride.
  struct Conv {
    int64_t c, hw, k, stride;
  };
  for (const Conv &v : {Conv{64, 56, 64, 1}, Conv{64, 56, 128, 2}, Conv{128, 28, 128, 1}, Conv{128, 28, 256, 2},
                        Conv{256, 14, 256, 1}, Conv{256, 14, 512, 2}, Conv{512, 7, 512, 1}}) {
    out.push_back({"conv_c" + std::to_string(v.c) + "_hw" + std::to_string(v.hw) + "_k" + std::to_string(v.k) + "_s" +
                       std::to_string(v.stride),
                   "conv2d_nchw.cuda",
                   Json::object({{"data", tensor({1, v.c, v.hw, v.hw})},
                                 {"kernel", tensor({v.k, v.c, 3, 3})},
                                 {"strides", v.stride},
                                 {"padding", 1}})});
  }
  return out;
}

int64_t param_bytes(const kiln::ir::Buffer &b) {
  int64_t n = b.dtype.bytes() * b.dtype.lanes();
  for (const auto &e : b.shape) {
    const auto v = kiln::ir::as_const_int(e);
    if (!v) throw kiln::UserError("parameter " + b.name + " has a symbolic shape");
    n *= *v;
  }
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s <folder> [target]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::string target = argc == 3 ? argv[2] : "cuda -arch=sm_90";
  try {
    std::filesystem::create_directories(dir);
    const kiln::codegen::CudaTarget cuda = kiln::codegen::parse_cuda_target(target);
    std::ofstream manifest(dir / "manifest.txt");
    for (const Shape &s : shapes()) {
      kiln::ops::Task task(s.templ, s.args, kiln::driver::resolve_target(target));
      const kiln::ir::LoweredFunc f = task.lower(task.default_config(), s.name);
      const kiln::codegen::CudaModule m(f, cuda);
      std::ofstream(dir / (s.name + ".ptx")) << m.ptx();
      const auto &l = m.launch();
      manifest << s.name << ' ' << s.name << ".ptx " << m.entry_name() << ' ' << l.grid[0] << ' ' << l.grid[1] << ' '
               << l.grid[2] << ' ' << l.block[0] << ' ' << l.block[1] << ' ' << l.block[2] << ' '
               << static_cast<int64_t>(task.flop()) << ' ' << f.params.size();
      for (const auto &p : f.params) {
        if (!(p.dtype.is_float() && p.dtype.bits() == 32))
          throw kiln::UserError(s.name + ": a parameter is not float32");
        manifest << ' ' << param_bytes(p);
      }
      manifest << '\n';
      std::printf("%s: %s, grid %lld,%lld,%lld block %lld,%lld,%lld\n", s.name.c_str(), s.templ.c_str(),
                  static_cast<long long>(l.grid[0]), static_cast<long long>(l.grid[1]),
                  static_cast<long long>(l.grid[2]), static_cast<long long>(l.block[0]),
                  static_cast<long long>(l.block[1]), static_cast<long long>(l.block[2]));
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cuda_kernels_gen: %s\n", e.what());
    return 1;
  }
  return 0;
}
