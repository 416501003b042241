// Writes Kiln's CUDA kernels into a folder for the standalone harness (cuda_harness.cpp) to run on
// a machine with a GPU, which needs nothing of Kiln there.
//
// Timing (manifest.txt): the default config of dense.cuda at 1024^3 and 4096^3 in float32, and in
// float16 accumulated in float32, and the 3x3 convolutions of ResNet-18 at batch 1 with
// conv2d_nchw.cuda (conv_...) and conv2d_nchw_implicit_gemm.cuda (igemm_...). With --configs N,
// N - 1 random configs of each space follow the default, named <shape>@<k>; the harness times
// them all and torch_baseline.py compares the best of each shape with torch (--configs 0 writes
// none of these). One line per kernel:
//   <name> <ptx file> <entry> <grid x y z> <block x y z> <flop> <params> <dtype:bytes of each param>
//
// Correctness (check.txt, with --check N): every CUDA template on one or two workloads with tails
// that no tile divides, the default config and N - 1 random ones. The inputs are random, written
// as raw files, and the expected outputs come from the interpreter running the unscheduled compute
// on the same inputs. One line per kernel:
//   <case> <k> <ptx file> <entry> <grid x y z> <block x y z> <tolerance> <params>
//   then per parameter: <in|out> <dtype> <bytes> <file (an input, or the expected output)>
// configs.txt gives each kernel's config.
//
//   cuda_kernels_gen <folder> [target] [--configs N] [--check N] [--only PREFIX]
//   (--only: the timing shapes whose names start with PREFIX; target: "cuda -arch=sm_90")
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/cuda/codegen_cuda.h"
#include "compiler/driver/target.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/error.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/op.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "compiler/te/schedule.h"
#include "contracts/json.h"
#include "deploy/tensor.h"

namespace {

using kiln::contracts::Json;
namespace fs = std::filesystem;

Json tensor(std::vector<int64_t> shape, const std::string &dtype = "float32") {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", dtype}});
}

struct Shape {
  std::string name, templ;
  Json args;
};

std::vector<Shape> bench_shapes() {
  std::vector<Shape> out;
  for (int64_t n : {1024, 4096}) {
    const std::string s = std::to_string(n);
    out.push_back({"dense_" + s, "dense.cuda", Json::object({{"data", tensor({n, n})}, {"weight", tensor({n, n})}})});
    out.push_back({"dense_" + s + "_f16", "dense.cuda",
                   Json::object({{"data", tensor({n, n}, "float16")},
                                 {"weight", tensor({n, n}, "float16")},
                                 {"out_dtype", Json("float32")}})});
  }
  // ResNet-18's 3x3 convolutions: input channels, size, output channels, stride.
  struct Conv {
    int64_t c, hw, k, stride;
  };
  for (const char *templ : {"conv2d_nchw.cuda", "conv2d_nchw_implicit_gemm.cuda"}) {
    const std::string prefix = std::strcmp(templ, "conv2d_nchw.cuda") == 0 ? "conv" : "igemm";
    for (const Conv &v : {Conv{64, 56, 64, 1}, Conv{64, 56, 128, 2}, Conv{128, 28, 128, 1}, Conv{128, 28, 256, 2},
                          Conv{256, 14, 256, 1}, Conv{256, 14, 512, 2}, Conv{512, 7, 512, 1}}) {
      out.push_back({prefix + "_c" + std::to_string(v.c) + "_hw" + std::to_string(v.hw) + "_k" + std::to_string(v.k) +
                         "_s" + std::to_string(v.stride),
                     templ,
                     Json::object({{"data", tensor({1, v.c, v.hw, v.hw})},
                                   {"kernel", tensor({v.k, v.c, 3, 3})},
                                   {"strides", v.stride},
                                   {"padding", 1}})});
    }
  }
  return out;
}

struct CheckCase {
  Shape shape;
  double tolerance;
};

// Workloads of every CUDA template whose sizes no tile divides, with epilogues where the template
// takes them; small enough for the interpreter to compute the expected outputs.
std::vector<CheckCase> check_cases() {
  const Json relu = Json::array({kiln::ops::epilogue::bias_add(), kiln::ops::epilogue::relu()});
  auto with = [](Json args, const std::string &key, Json value) {
    args.set(key, std::move(value));
    return args;
  };
  return {
      {{"matmul", "matmul.cuda", Json::object({{"a", tensor({100, 72})}, {"b", tensor({72, 130})}})}, 1e-3},
      {{"dense_relu", "dense.cuda",
        Json::object({{"data", tensor({67, 96})}, {"weight", tensor({80, 96})}, {"epilogue", relu}})},
       1e-3},
      {{"dense_f16_f32acc", "dense.cuda",
        Json::object({{"data", tensor({48, 128}, "float16")},
                      {"weight", tensor({40, 128}, "float16")},
                      {"out_dtype", Json("float32")}})},
       1e-3},
      {{"batch_matmul", "batch_matmul.cuda", Json::object({{"a", tensor({3, 40, 32})}, {"b", tensor({3, 50, 32})}})},
       1e-3},
      {{"conv2d_relu", "conv2d_nchw.cuda",
        Json::object(
            {{"data", tensor({1, 16, 15, 15})}, {"kernel", tensor({24, 16, 3, 3})}, {"padding", 1}, {"epilogue", relu}})},
       1e-3},
      {{"conv2d_s2", "conv2d_nchw.cuda",
        Json::object({{"data", tensor({1, 8, 17, 17})}, {"kernel", tensor({16, 8, 3, 3})}, {"strides", 2}, {"padding", 1}})},
       1e-3},
      {{"igemm_stem", "conv2d_nchw_implicit_gemm.cuda",
        with(Json::object({{"data", tensor({1, 3, 17, 17})}, {"kernel", tensor({16, 3, 3, 3})}, {"strides", 2}, {"padding", 1}}),
             "epilogue", relu)},
       1e-3},
      {{"igemm_3x3", "conv2d_nchw_implicit_gemm.cuda",
        Json::object({{"data", tensor({1, 32, 14, 14})}, {"kernel", tensor({40, 32, 3, 3})}, {"padding", 1}})},
       1e-3},
      {{"depthwise", "depthwise_conv2d_nchw.cuda",
        Json::object({{"data", tensor({1, 32, 14, 14})}, {"kernel", tensor({32, 1, 3, 3})}, {"padding", 1}})},
       1e-3},
      {{"maxpool", "pool2d.cuda",
        Json::parse(R"({"data": {"shape": [1, 16, 29, 29]}, "kernel": 3, "strides": 2, "padding": 1,
                        "pool_type": "max"})")},
       1e-5},
      {{"avgpool_relu", "pool2d.cuda",
        with(Json::parse(R"({"data": {"shape": [1, 8, 24, 24]}, "kernel": 3, "strides": 1, "padding": 1,
                             "pool_type": "avg", "count_include_pad": false})"),
             "epilogue", relu)},
       1e-4},
      {{"reduce_sum", "reduce.cuda", Json::parse(R"({"data": {"shape": [37, 300]}, "axes": 1})")}, 1e-3},
      {{"global_avg_relu", "reduce.cuda",
        with(Json::parse(R"({"data": {"shape": [1, 64, 7, 7]}, "axes": [2, 3], "op": "mean"})"), "epilogue", relu)},
       1e-4},
      {{"softmax", "softmax.cuda", Json::parse(R"({"data": {"shape": [12, 300]}})")}, 1e-5},
      {{"layer_norm", "layer_norm.cuda", Json::parse(R"({"data": {"shape": [16, 384]}})")}, 1e-4},
      {{"elemwise_relu", "elemwise.cuda",
        Json::object({{"data", tensor({3, 1000})}, {"epilogue", Json::array({kiln::ops::epilogue::relu()})}})},
       0},
      {{"broadcast", "broadcast.cuda", Json::object({{"lhs", tensor({64, 100})}, {"rhs", tensor({100})}})}, 1e-6},
  };
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

std::string dtype_name(const kiln::ir::Buffer &b) {
  if (b.dtype.is_float() && b.dtype.bits() == 32 && b.dtype.lanes() == 1) return "f32";
  if (b.dtype.is_float() && b.dtype.bits() == 16 && b.dtype.lanes() == 1) return "f16";
  throw kiln::UserError("parameter " + b.name + " is neither float32 nor float16");
}

std::vector<int64_t> shape_of(const kiln::ir::Buffer &b) {
  std::vector<int64_t> s;
  for (const auto &e : b.shape) s.push_back(*kiln::ir::as_const_int(e));
  return s;
}

// The default config and n - 1 random ones (the space's constraints hold for each).
std::vector<kiln::autotune::Config> configs_of(const kiln::ops::Task &task, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<kiln::autotune::Config> out = {task.default_config()};
  std::set<int64_t> seen = {out[0].index()};
  const int64_t valid = task.space().count_valid();
  for (int tries = 0; static_cast<int>(out.size()) < n && static_cast<int64_t>(out.size()) < valid && tries < 50 * n;
       ++tries) {
    kiln::autotune::Config c = task.space().sample(rng);
    if (seen.insert(c.index()).second) out.push_back(std::move(c));
  }
  return out;
}

void write_launch(std::ostream &o, const kiln::codegen::CudaModule &m) {
  const auto &l = m.launch();
  o << m.entry_name() << ' ' << l.grid[0] << ' ' << l.grid[1] << ' ' << l.grid[2] << ' ' << l.block[0] << ' '
    << l.block[1] << ' ' << l.block[2];
}

void write_bench(const fs::path &dir, const std::string &target, int configs, const std::string &only) {
  const kiln::codegen::CudaTarget cuda = kiln::codegen::parse_cuda_target(target);
  std::ofstream manifest(dir / "manifest.txt");
  std::ofstream names(dir / "configs.txt", std::ios::app);
  int failed = 0;
  for (const Shape &s : bench_shapes()) {
    if (s.name.rfind(only, 0) != 0) continue;
    kiln::ops::Task task(s.templ, s.args, kiln::driver::resolve_target(target));
    const auto cfgs = configs_of(task, configs, 7);
    for (size_t k = 0; k < cfgs.size(); ++k) {
      const std::string name = k == 0 ? s.name : s.name + "@" + std::to_string(k);
      const kiln::ir::LoweredFunc f = task.lower(cfgs[k], s.name);
      std::unique_ptr<kiln::codegen::CudaModule> module;
      try {
        module = std::make_unique<kiln::codegen::CudaModule>(f, cuda);
      } catch (const std::exception &e) {  // a config the back end cannot compile: said, then skipped
        std::printf("%s: %s does not compile: %s\n", name.c_str(), cfgs[k].to_string().c_str(), e.what());
        ++failed;
        continue;
      }
      const kiln::codegen::CudaModule &m = *module;
      std::ofstream(dir / (name + ".ptx")) << m.ptx();
      manifest << name << ' ' << name << ".ptx ";
      write_launch(manifest, m);
      manifest << ' ' << static_cast<int64_t>(task.flop()) << ' ' << f.params.size();
      for (const auto &p : f.params) manifest << ' ' << dtype_name(p) << ':' << param_bytes(p);
      manifest << '\n';
      names << name << ' ' << s.templ << ' ' << cfgs[k].to_string() << '\n';
    }
    std::printf("%s: %s, %zu configs\n", s.name.c_str(), s.templ.c_str(), cfgs.size());
    std::fflush(stdout);
  }
  if (failed > 0) throw kiln::UserError(std::to_string(failed) + " configs did not compile (above)");
}

// Random values on a grid of 1/64 in [-1, 1): exact in float16 too.
void fill(kiln::deploy::Tensor &t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = static_cast<float>(rng() % 128) / 64.0f - 1.0f;
    if (t.dtype().bits == 16) {
      static_cast<uint16_t *>(t.data())[i] = kiln::ir::float_to_half(v);
    } else {
      static_cast<float *>(t.data())[i] = v;
    }
  }
}

void write_file(const fs::path &p, const kiln::deploy::Tensor &t) {
  std::ofstream(p, std::ios::binary).write(static_cast<const char *>(t.data()), static_cast<std::streamsize>(t.nbytes()));
}

void write_check(const fs::path &dir, const std::string &target, int configs) {
  const kiln::codegen::CudaTarget cuda = kiln::codegen::parse_cuda_target(target);
  std::ofstream manifest(dir / "check.txt");
  std::ofstream names(dir / "configs.txt", std::ios::app);
  for (const CheckCase &c : check_cases()) {
    const Shape &s = c.shape;
    kiln::ops::Task task(s.templ, s.args, kiln::driver::resolve_target(target));
    kiln::ops::Compute ref_c = task.compute(task.default_config());
    auto ref_s = kiln::te::create_schedule(ref_c.outputs);
    const kiln::ir::LoweredFunc ref = kiln::lower::lower(*ref_s, ref_c.args(), "reference");
    std::vector<kiln::deploy::Tensor> args;
    for (size_t i = 0; i < ref.params.size(); ++i) {
      args.push_back(kiln::deploy::Tensor::empty(shape_of(ref.params[i]), kiln::ir::to_deploy_dtype(ref.params[i].dtype)));
      fill(args.back(), 17 + i);
    }
    kiln::interp::run(ref, args);  // the outputs now hold the expected values
    const size_t n_in = ref_c.inputs.size();
    std::vector<std::string> files;
    for (size_t i = 0; i < args.size(); ++i) {
      files.push_back("check_" + s.name + (i < n_in ? ".in" : ".out") + std::to_string(i) + ".bin");
      write_file(dir / files.back(), args[i]);
    }
    const auto cfgs = configs_of(task, configs, 11);
    for (size_t k = 0; k < cfgs.size(); ++k) {
      const kiln::ir::LoweredFunc f = task.lower(cfgs[k], s.name);
      const kiln::codegen::CudaModule m(f, cuda);
      const std::string ptx = "check_" + s.name + "@" + std::to_string(k) + ".ptx";
      std::ofstream(dir / ptx) << m.ptx();
      manifest << s.name << ' ' << k << ' ' << ptx << ' ';
      write_launch(manifest, m);
      manifest << ' ' << c.tolerance << ' ' << f.params.size();
      for (size_t i = 0; i < f.params.size(); ++i) {
        manifest << ' ' << (i < n_in ? "in" : "out") << ' ' << dtype_name(f.params[i]) << ' '
                 << param_bytes(f.params[i]) << ' ' << files.at(i);
      }
      manifest << '\n';
      names << "check " << s.name << '@' << k << ' ' << s.templ << ' ' << cfgs[k].to_string() << '\n';
    }
    std::printf("check %s: %s, %zu configs\n", s.name.c_str(), s.templ.c_str(), cfgs.size());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> positional;
  int configs = 1, check = 0;
  std::string only;  // the shapes whose names start with this
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--configs" || a == "--check") && i + 1 < argc) {
      (a == "--configs" ? configs : check) = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      positional.push_back(a);
    }
  }
  if (positional.empty() || positional.size() > 2 || configs < 0 || check < 0) {
    std::fprintf(stderr, "usage: %s <folder> [target] [--configs N] [--check N] [--only PREFIX]\n", argv[0]);
    return 2;
  }
  const fs::path dir = positional[0];
  const std::string target = positional.size() == 2 ? positional[1] : "cuda -arch=sm_90";
  try {
    fs::create_directories(dir);
    fs::remove(dir / "configs.txt");
    if (configs > 0) write_bench(dir, target, configs, only);
    if (check > 0) write_check(dir, target, check);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cuda_kernels_gen: %s\n", e.what());
    return 1;
  }
  return 0;
}
