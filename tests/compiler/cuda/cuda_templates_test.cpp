// The CUDA templates: random configs of each space, lowered and run through the interpreter's GPU
// simulation, against the unscheduled compute on the same inputs; the default config and a few
// random ones compiled with NVRTC.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/cuda/codegen_cuda.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/ir/float16.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/example_workloads.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::ops {
namespace {

using contracts::Json;

Target cuda_target() { return Target(contracts::Target::parse("cuda -arch=sm_80"), 128); }

std::vector<std::vector<int64_t>> shapes_of(const std::vector<te::Tensor> &ts) {
  std::vector<std::vector<int64_t>> out;
  for (const auto &t : ts) {
    std::vector<int64_t> shape;
    for (const auto &d : t.shape()) shape.push_back(*ir::as_const_int(d));
    out.push_back(shape);
  }
  return out;
}

// Runs each config in the interpreter against the unscheduled compute, the lowered function as it
// is and as the CUDA back end writes the kernel (block phases, virtual threads interleaved:
// cuda_kernel_ir); returns how many matched.
int check_configs(const Task &task, const std::vector<autotune::Config> &configs, double tol) {
  Compute ref_c = task.compute(task.default_config());
  auto ref_s = te::create_schedule(ref_c.outputs);
  ir::LoweredFunc ref = lower::lower(*ref_s, ref_c.args(), "reference");
  auto shapes = shapes_of(ref_c.args());
  auto in = testing::make_args(ref, shapes, 17);
  auto expect = testing::run_interp(ref, in);
  const size_t n_in = ref_c.inputs.size();

  int checked = 0;
  for (const autotune::Config &cfg : configs) {
    SCOPED_TRACE(cfg.to_string());
    ir::LoweredFunc f = task.lower(cfg, "k");
    codegen::LaunchDims dims = codegen::launch_dims(f);
    EXPECT_LE(dims.threads_per_block(), 1024);
    EXPECT_LE(codegen::shared_memory_bytes(f), 48 * 1024);
    for (const ir::LoweredFunc &g : {f, codegen::cuda_kernel_ir(f)}) {
      auto got = testing::run_interp(g, in);
      for (size_t a = n_in; a < got.size(); ++a) {
        EXPECT_LE(testing::max_diff(expect[a], got[a]), tol) << g;
      }
    }
    if (::testing::Test::HasFailure()) break;
    ++checked;
  }
  return checked;
}

// The default config and `n - 1` random ones.
std::vector<autotune::Config> random_configs(const Task &task, int n) {
  std::mt19937_64 rng(42);
  std::vector<autotune::Config> configs = {task.default_config()};
  while (static_cast<int>(configs.size()) < n) configs.push_back(task.space().sample(rng));
  return configs;
}

// `n` random configs (from `seed`) for which `keep` holds.
std::vector<autotune::Config> sampled_configs(const Task &task, size_t n, uint64_t seed,
                                              const std::function<bool(const autotune::Config &)> &keep) {
  std::mt19937_64 rng(seed);
  std::vector<autotune::Config> configs;
  while (configs.size() < n) {
    autotune::Config cfg = task.space().sample(rng);
    if (keep(cfg)) configs.push_back(std::move(cfg));
  }
  return configs;
}

void expect_compiles(const Task &task, int random_configs) {
  if (!codegen::nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  std::mt19937_64 rng(7);
  for (int i = 0; i <= random_configs; ++i) {
    autotune::Config cfg = i == 0 ? task.default_config() : task.space().sample(rng);
    SCOPED_TRACE(cfg.to_string());
    for (const char *arch : {"sm_80", "sm_90"}) {
      codegen::CudaModule m(task.lower(cfg, "k"), codegen::parse_cuda_target(std::string("cuda -arch=") + arch));
      EXPECT_NE(m.ptx().find(".entry k"), std::string::npos);
    }
  }
}

// The largest difference between the outputs of `task`'s default config and the unscheduled
// compute of the template `reference` on the same workload and inputs: a check of the task's own
// compute against an independent one.
double diff_from_template(const Task &task, const std::string &reference, const Json &args) {
  const Task ref(reference, args, cuda_target());
  Compute ref_c = ref.compute(ref.default_config());
  auto ref_s = te::create_schedule(ref_c.outputs);
  ir::LoweredFunc ref_f = lower::lower(*ref_s, ref_c.args(), "reference");
  auto in = testing::make_args(ref_f, shapes_of(ref_c.args()), 17);
  auto expect = testing::run_interp(ref_f, in);
  auto got = testing::run_interp(task.lower(task.default_config(), "k"), in);
  double diff = 0;
  for (size_t a = ref_c.inputs.size(); a < got.size(); ++a) diff = std::max(diff, testing::max_diff(expect[a], got[a]));
  return diff;
}

// Whether the source stores to `buffer` on two lines in a row, the second at the first's index plus
// `stride`: the statements of two virtual threads interleaved, each with its copy of the buffer.
bool stores_interleaved(const std::string &src, const std::string &buffer, int64_t stride) {
  std::vector<std::string> indices;  // the index stored to on each line, "" where none
  size_t pos = 0;
  while (pos < src.size()) {
    size_t end = src.find('\n', pos);
    if (end == std::string::npos) end = src.size();
    std::string line = src.substr(pos, end - pos);
    line.erase(0, line.find_first_not_of(' '));
    const size_t close = line.find("] = ");
    indices.push_back(line.rfind(buffer + "[", 0) == 0 && close != std::string::npos
                          ? line.substr(buffer.size() + 1, close - buffer.size() - 1)
                          : "");
    pos = end + 1;
  }
  const std::string plus = " + " + std::to_string(stride);
  for (size_t i = 0; i + 1 < indices.size(); ++i) {
    const std::string &a = indices[i], &b = indices[i + 1];
    if (!a.empty() && (b == a + plus || b == "(" + a + ")" + plus)) return true;
  }
  return false;
}

// The templates with one thread per output have small spaces (the block size): every config of
// each is checked, on the example workload of the operator (tests/compiler/ops).
TEST(CudaTemplates, EveryConfigOfTheThreadPerOutputTemplatesMatchesTheUnscheduledCompute) {
  int templates = 0;
  for (const testing::ExampleWorkload &w : testing::example_workloads()) {
    const std::string &name = w.template_name;
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".cuda") != 0) continue;
    if (name == "matmul.cuda" || name == "dense.cuda" || name == "batch_matmul.cuda" || name == "softmax.cuda" ||
        name == "layer_norm.cuda" || name == "conv2d_nchw.cuda" || name == "depthwise_conv2d_nchw.cuda" ||
        name == "conv2d_nchw_implicit_gemm.cuda") {
      continue;
    }
    SCOPED_TRACE(name);
    Task task(name, w.args, cuda_target());
    const int n = static_cast<int>(task.space().count_valid());
    EXPECT_GE(n, 1);
    EXPECT_EQ(check_configs(task, task.space().enumerate(), 1e-4), n);
    expect_compiles(task, 1);
    ++templates;
  }
  EXPECT_EQ(templates, 4);
}

TEST(CudaTemplates, MatmulRandomConfigsMatchTheUnscheduledCompute) {
  Json args = Json::parse(R"({"a": {"shape": [12, 20]}, "b": {"shape": [20, 18]}})");
  Task task("matmul.cuda", args, cuda_target());
  EXPECT_GT(task.space().count_valid(), 200);
  const std::vector<autotune::Config> configs = random_configs(task, 200);
  EXPECT_EQ(check_configs(task, configs, 1e-4), 200);
  // Virtual threads, several threads and several stages of shared memory all come up.
  int vthreads = 0, threads = 0, stages = 0;
  for (const auto &cfg : configs) {
    const auto y = cfg.split("tile_y"), x = cfg.split("tile_x"), k = cfg.split("tile_k");
    vthreads += y[1] * x[1] > 1;
    threads += y[2] * x[2] > 1;
    stages += k[0] > 1;
  }
  EXPECT_GT(vthreads, 50);
  EXPECT_GT(threads, 50);
  EXPECT_GT(stages, 50);
  const autotune::Config with_vthreads =
      task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 2, 3, 2})},
                                {"tile_x", Json::array_of(std::vector<int64_t>{1, 3, 3, 2})},
                                {"tile_k", Json::array_of(std::vector<int64_t>{4, 5})}});
  const std::string src = codegen::codegen_cuda(task.lower(with_vthreads, "k"));
  // Six virtual threads (2 x 3) interleaved, not a loop: each has its copy of the 2 x 2 register
  // tile and of the shared tiles of A (3 x 2 rows by 5) and B (5 by 3 x 2 columns); their loads
  // into shared memory and their updates of the register tile are adjacent.
  EXPECT_EQ(src.find("// vthread"), std::string::npos) << src;
  EXPECT_NE(src.find("float matmul_local[24];"), std::string::npos) << src;
  EXPECT_NE(src.find("__shared__ __align__(16) float a_shared[180];"), std::string::npos) << src;
  EXPECT_TRUE(stores_interleaved(src, "matmul_local", 4)) << src;
  EXPECT_TRUE(stores_interleaved(src, "a_shared", 30)) << src;
  EXPECT_TRUE(stores_interleaved(src, "b_shared", 30)) << src;
  expect_compiles(task, 3);
}

// A thread's accumulators, its register tiles of every virtual thread together, are at most 256
// in the GEMM and convolution spaces: on an H200, random dense configs beyond that took NVRTC over
// 10 s, and one of 1 MiB could not be written. The config that tried is outside the space now.
TEST(CudaTemplates, GemmAndConvolutionSpacesKeepTheRegisterTileWithin256) {
  const auto split = [](std::vector<int64_t> v) { return Json::array_of(v); };
  const Json dense = Json::parse(R"({"data": {"shape": [1024, 1024]}, "weight": {"shape": [1024, 1024]}})");
  const Json conv = Json::parse(R"({"data": {"shape": [1, 128, 28, 28]}, "kernel": {"shape": [128, 128, 3, 3]},
                                    "padding": 1})");
  for (const auto &[name, args] : std::vector<std::pair<std::string, Json>>{
           {"dense.cuda", dense}, {"conv2d_nchw.cuda", conv}, {"conv2d_nchw_implicit_gemm.cuda", conv}}) {
    SCOPED_TRACE(name);
    Task task(name, args, cuda_target());
    const bool gemm = name == "dense.cuda";
    std::mt19937_64 rng(9);
    int64_t largest = 0;
    for (int i = 0; i < 3000; ++i) {
      const autotune::Config c = task.space().sample(rng);
      int64_t tile = 1;
      for (const char *knob : {"tile_f", "tile_y", "tile_x"}) {
        if (gemm && std::string(knob) == "tile_f") continue;
        tile *= c.split(knob)[1] * c.split(knob)[3];
      }
      ASSERT_LE(tile, 256) << c.to_string();
      largest = std::max(largest, tile);
    }
    EXPECT_GE(largest, 64) << "the limit, not the sampling, bounds the tiles";
  }
  Task task("dense.cuda", dense, cuda_target());
  EXPECT_THROW(task.space().from_values({{"tile_y", split({4, 1, 1, 256})},
                                         {"tile_x", split({1, 8, 1, 128})},
                                         {"tile_k", split({256, 4})}}),
               autotune::ConfigError);
}

// The convolutions bind tile_f's threads to threadIdx.z, of which a CUDA block has 64: the config
// that failed to launch on an H200 (128 threads in z) is outside both spaces, and no config of
// them puts more than 64 there.
TEST(CudaTemplates, ConvolutionSpacesKeepThreadIdxZWithinCudasLimit) {
  const auto split = [](std::vector<int64_t> v) { return Json::array_of(v); };
  const Json args = Json::parse(R"({"data": {"shape": [1, 512, 7, 7]}, "kernel": {"shape": [512, 512, 3, 3]},
                                    "padding": 1})");
  for (const char *name : {"conv2d_nchw.cuda", "conv2d_nchw_implicit_gemm.cuda"}) {
    SCOPED_TRACE(name);
    Task task(name, args, cuda_target());
    std::mt19937_64 rng(3);
    for (int i = 0; i < 2000; ++i) ASSERT_LE(task.space().sample(rng).split("tile_f")[2], 64);
    for (int i = 0; i < 50; ++i) {  // and the lowered kernels' launches (fewer: lowering is slower)
      const autotune::Config c = task.space().sample(rng);
      ASSERT_LE(codegen::launch_dims(task.lower(c, "k")).block[2], 64) << c.to_string();
    }
  }
  Task conv("conv2d_nchw.cuda", args, cuda_target());
  EXPECT_THROW(conv.space().from_values({{"tile_f", split({4, 1, 128, 1})},
                                         {"tile_y", split({1, 1, 7, 1})},
                                         {"tile_x", split({1, 7, 1, 1})},
                                         {"tile_rc", split({512, 1})},
                                         {"tile_ry", split({1, 3})},
                                         {"tile_rx", split({3, 1})}}),
               autotune::ConfigError);
}

// double_buffer: the shared-memory stages get two copies; each step loads the next step's tiles
// into one while computing from the other (after a first load before the loop).
TEST(CudaTemplates, MatmulDoubleBufferedStagesMatchTheUnscheduledCompute) {
  Json args = Json::parse(R"({"a": {"shape": [12, 20]}, "b": {"shape": [20, 18]}})");
  Task task("matmul.cuda", args, cuda_target());
  const std::vector<autotune::Config> configs = sampled_configs(task, 100, 11, [](const autotune::Config &cfg) {
    return cfg.choice_bool("double_buffer") && cfg.split("tile_k")[0] > 1;
  });
  EXPECT_EQ(check_configs(task, configs, 1e-4), 100);
  const autotune::Config single =
      task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 2, 3, 2})},
                                {"tile_x", Json::array_of(std::vector<int64_t>{1, 3, 3, 2})},
                                {"tile_k", Json::array_of(std::vector<int64_t>{4, 5})}});
  const autotune::Config twice = task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 2, 3, 2})},
                                                           {"tile_x", Json::array_of(std::vector<int64_t>{1, 3, 3, 2})},
                                                           {"tile_k", Json::array_of(std::vector<int64_t>{4, 5})},
                                                           {"double_buffer", Json(int64_t{1})}});
  EXPECT_EQ(codegen::shared_memory_bytes(task.lower(twice, "k")),
            2 * codegen::shared_memory_bytes(task.lower(single, "k")));
  const std::string src = codegen::codegen_cuda(task.lower(twice, "k"));
  EXPECT_NE(src.find("__shared__ __align__(16) float a_shared[360];"), std::string::npos) << src;
}

// auto_unroll_max_step: the loops of a reduction step of up to that many steps in all are
// unrolled (here 5 steps of a 2 x 2 register tile: 20).
TEST(CudaTemplates, MatmulAutoUnrollUnrollsTheReductionStep) {
  Json args = Json::parse(R"({"a": {"shape": [12, 20]}, "b": {"shape": [20, 18]}})");
  Task task("matmul.cuda", args, cuda_target());
  auto config = [&](int64_t steps) {
    return task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 2, 3, 2})},
                                     {"tile_x", Json::array_of(std::vector<int64_t>{1, 3, 3, 2})},
                                     {"tile_k", Json::array_of(std::vector<int64_t>{4, 5})},
                                     {"auto_unroll_max_step", Json(steps)}});
  };
  const std::vector<autotune::Config> configs = {config(0), config(16), config(64)};
  EXPECT_EQ(check_configs(task, configs, 1e-4), 3);
  const std::string rolled = codegen::codegen_cuda(task.lower(configs[0], "k"));
  const std::string small = codegen::codegen_cuda(task.lower(configs[1], "k"));
  const std::string unrolled = codegen::codegen_cuda(task.lower(configs[2], "k"));
  EXPECT_NE(rolled.find("k_c_inner < 5"), std::string::npos) << rolled;
  EXPECT_NE(small.find("k_c_inner < 5"), std::string::npos) << small;  // 20 steps > 16
  EXPECT_EQ(unrolled.find("k_c_inner"), std::string::npos) << unrolled;
}

// unroll_explicit: the reduction step and the register tile that unroll_k unrolls stay loops in
// the IR, written under `#pragma unroll` for the CUDA compiler; 100 random configs that use it.
TEST(CudaTemplates, UnrollExplicitLeavesTheReductionStepToTheCudaCompiler) {
  Json args = Json::parse(R"({"a": {"shape": [12, 20]}, "b": {"shape": [20, 18]}})");
  Task task("matmul.cuda", args, cuda_target());
  const std::vector<autotune::Config> configs = sampled_configs(task, 100, 13, [](const autotune::Config &cfg) {
    EXPECT_TRUE(!cfg.choice_bool("unroll_explicit") || cfg.choice_int("auto_unroll_max_step") == 0);
    return cfg.choice_bool("unroll_k") && cfg.choice_bool("unroll_explicit");
  });
  EXPECT_EQ(check_configs(task, configs, 1e-4), 100);
  auto config = [&](int64_t explicit_unroll) {
    return task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 2, 3, 2})},
                                     {"tile_x", Json::array_of(std::vector<int64_t>{1, 3, 3, 2})},
                                     {"tile_k", Json::array_of(std::vector<int64_t>{4, 5})},
                                     {"unroll_k", Json(int64_t{1})},
                                     {"unroll_explicit", Json(explicit_unroll)}});
  };
  EXPECT_EQ(check_configs(task, {config(0), config(1)}, 1e-4), 2);
  const std::string in_ir = codegen::codegen_cuda(task.lower(config(0), "k"));
  const std::string left = codegen::codegen_cuda(task.lower(config(1), "k"));
  EXPECT_EQ(in_ir.find("k_c_inner"), std::string::npos) << in_ir;
  EXPECT_EQ(in_ir.find("#pragma unroll"), std::string::npos) << in_ir;
  // Each loop of the step, and of the register tile's initialization, right after the pragma.
  for (const char *loop :
       {"for (int32_t k_c_inner = 0; k_c_inner < 5; ++k_c_inner) {", "for (int32_t i_c = 0; i_c < 2; ++i_c) {",
        "for (int32_t j_c = 0; j_c < 2; ++j_c) {", "for (int32_t i_c_1 = 0; i_c_1 < 2; ++i_c_1) {",
        "for (int32_t j_c_1 = 0; j_c_1 < 2; ++j_c_1) {"}) {
    SCOPED_TRACE(loop);
    const size_t at = left.find(loop);
    ASSERT_NE(at, std::string::npos) << left;
    const size_t line = left.rfind("#pragma unroll\n", at);
    ASSERT_NE(line, std::string::npos) << left;
    EXPECT_EQ(left.find_first_not_of(' ', line + 15), at) << left;
  }
  size_t pragmas = 0;
  for (size_t at = left.find("#pragma unroll"); at != std::string::npos; at = left.find("#pragma unroll", at + 1)) {
    ++pragmas;
  }
  EXPECT_EQ(pragmas, 5u) << left;
  // unroll_explicit with auto_unroll_max_step is not a config of the space.
  EXPECT_THROW(
      task.space().from_values({{"unroll_explicit", Json(int64_t{1})}, {"auto_unroll_max_step", Json(int64_t{16})}}),
      autotune::ConfigError);
  if (!codegen::nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  for (const char *arch : {"sm_80", "sm_90"}) {
    codegen::CudaModule m(task.lower(config(1), "k"), codegen::parse_cuda_target(std::string("cuda -arch=") + arch));
    EXPECT_NE(m.ptx().find(".entry k"), std::string::npos);
  }
}

// vectorize: each thread stages that many consecutive elements of a tile in shared memory as one
// vector, which the kernel reads and writes as one float4 (float2) access where both sides are
// aligned: A's rows (K a multiple of 4) and B's rows (N a multiple of 4). 100 random configs that
// vectorize, of matmul and dense.
TEST(CudaTemplates, VectorizedStagingMatchesTheUnscheduledComputeAndUsesFloat4) {
  const std::vector<std::pair<std::string, Json>> workloads = {
      {"matmul.cuda", Json::parse(R"({"a": {"shape": [12, 32]}, "b": {"shape": [32, 24]}})")},
      {"dense.cuda", Json::parse(R"({"data": {"shape": [12, 16]}, "weight": {"shape": [20, 16]}})")},
  };
  for (const auto &[name, args] : workloads) {
    SCOPED_TRACE(name);
    Task task(name, args, cuda_target());
    const std::vector<autotune::Config> configs =
        sampled_configs(task, 100, 5, [](const autotune::Config &cfg) { return cfg.choice_int("vectorize") > 1; });
    int fours = 0;
    for (const autotune::Config &cfg : configs) {
      EXPECT_EQ(cfg.split("tile_k")[1] % cfg.choice_int("vectorize"), 0);
      fours += cfg.choice_int("vectorize") == 4;
    }
    EXPECT_GT(fours, 20);
    EXPECT_EQ(check_configs(task, configs, 1e-4), 100);
  }
  Task task("matmul.cuda", workloads[0].second, cuda_target());
  auto config = [&](int64_t vector) {
    return task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{3, 1, 2, 2})},
                                     {"tile_x", Json::array_of(std::vector<int64_t>{2, 1, 4, 3})},
                                     {"tile_k", Json::array_of(std::vector<int64_t>{4, 8})},
                                     {"vectorize", Json(vector)}});
  };
  const std::string scalar = codegen::codegen_cuda(task.lower(config(1), "k"));
  const std::string vector = codegen::codegen_cuda(task.lower(config(4), "k"));
  EXPECT_EQ(scalar.find("float4"), std::string::npos) << scalar;
  EXPECT_NE(vector.find("*reinterpret_cast<float4*>(&a_shared["), std::string::npos) << vector;
  EXPECT_NE(vector.find("*reinterpret_cast<const float4*>(&a["), std::string::npos) << vector;
  EXPECT_NE(vector.find("*reinterpret_cast<float4*>(&b_shared["), std::string::npos) << vector;
  EXPECT_NE(codegen::codegen_cuda(task.lower(config(2), "k")).find("*reinterpret_cast<float2*>(&a_shared["),
            std::string::npos);
  // A step of 6 columns of A cannot be split in fours.
  EXPECT_THROW(task.space().from_values(
                   {{"tile_k", Json::array_of(std::vector<int64_t>{4, 6})}, {"vectorize", Json(int64_t{4})}}),
               autotune::ConfigError);
  if (!codegen::nvrtc_available()) GTEST_SKIP() << "Kiln was built without the CUDA toolkit (NVRTC)";
  for (const char *arch : {"sm_80", "sm_90"}) {
    codegen::CudaModule m(task.lower(config(4), "k"), codegen::parse_cuda_target(std::string("cuda -arch=") + arch));
    // 16-byte loads from global memory and stores to shared memory.
    EXPECT_NE(m.ptx().find("ld.global.nc.v4."), std::string::npos) << arch << m.ptx();
    EXPECT_NE(m.ptx().find("st.shared.v4."), std::string::npos) << arch << m.ptx();
  }
}

// dense and batch_matmul share matmul.cuda's schedule; their weight is read in the packed layout
// of the x86 compute, the packing inlined into the shared-memory staging. A batch is a grid z.
TEST(CudaTemplates, DenseAndBatchMatmulRandomConfigsMatchTheUnscheduledCompute) {
  const Json relu = Json::array({epilogue::bias_add(), epilogue::relu()});
  const Json t12x16 = Json::parse(R"({"shape": [12, 16]})");
  const std::vector<std::pair<std::string, Json>> workloads = {
      {"dense.cuda",
       Json::object({{"data", t12x16}, {"weight", Json::parse(R"({"shape": [18, 16]})")}, {"epilogue", relu}})},
      {"batch_matmul.cuda", Json::parse(R"({"a": {"shape": [2, 12, 16]}, "b": {"shape": [2, 18, 16]}})")},
      {"batch_matmul.cuda", Json::parse(R"({"a": {"shape": [3, 12, 16]}, "b": {"shape": [1, 16, 18]},
                                            "transpose_b": false})")},
  };
  for (size_t w = 0; w < workloads.size(); ++w) {
    const auto &[name, args] = workloads[w];
    SCOPED_TRACE(name + " " + args.dump());
    Task task(name, args, cuda_target());
    EXPECT_GT(task.space().count_valid(), 200);
    const int n = w < 2 ? 200 : 30;  // 200 of each template; the broadcast weight's layout, 30
    EXPECT_EQ(check_configs(task, random_configs(task, n), 1e-4), n);
    expect_compiles(task, 2);
  }
  Task batched("batch_matmul.cuda", workloads[1].second, cuda_target());
  const codegen::LaunchDims dims = codegen::launch_dims(batched.lower(batched.default_config(), "k"));
  EXPECT_EQ(dims.grid[2], 2);
}

// float16 inputs of dense.cuda and matmul.cuda, accumulated in float32 (out_dtype) or in float16:
// 100 random configs against a double reference on the same half inputs, within float16's
// rounding; the staging copies 4 halves (8 bytes) as one access; NVRTC compiles the kernels.
TEST(CudaTemplates, Float16GemmsMatchAFloatReference) {
  const Json h12x16 = Json::parse(R"({"shape": [12, 16], "dtype": "float16"})");
  const Json h20x16 = Json::parse(R"({"shape": [20, 16], "dtype": "float16"})");
  const Json h16x20 = Json::parse(R"({"shape": [16, 20], "dtype": "float16"})");
  struct Case {
    std::string name;
    Json args;
    bool transposed_b;  // b is [N, K]
    double tol;
  };
  const std::vector<Case> cases = {
      {"dense.cuda", Json::object({{"data", h12x16}, {"weight", h20x16}, {"out_dtype", Json("float32")}}), true, 1e-4},
      {"dense.cuda", Json::object({{"data", h12x16}, {"weight", h20x16}}), true, 0.125},
      {"matmul.cuda", Json::object({{"a", h12x16}, {"b", h16x20}, {"out_dtype", Json("float32")}}), false, 1e-4},
      {"matmul.cuda", Json::object({{"a", h12x16}, {"b", h16x20}}), false, 0.125},
  };
  const int64_t M = 12, N = 20, K = 16;
  std::mt19937_64 fill(3);
  auto halves = [&](int64_t rows, int64_t cols) {
    deploy::Tensor t = testing::make_tensor({rows, cols}, ir::Float(16));
    for (int64_t i = 0; i < rows * cols; ++i) {
      static_cast<uint16_t *>(t.data())[i] = ir::float_to_half(static_cast<float>(fill() % 128) / 64.0f - 1.0f);
    }
    return t;
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name + " " + c.args.dump());
    Task task(c.name, c.args, cuda_target());
    const deploy::Tensor a = halves(M, K), b = c.transposed_b ? halves(N, K) : halves(K, N);
    const bool f32_out = c.args.contains("out_dtype");
    std::vector<double> expect(M * N, 0.0);
    auto h = [](const deploy::Tensor &t, int64_t i) {
      return static_cast<double>(ir::half_to_float(static_cast<const uint16_t *>(t.data())[i]));
    };
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        for (int64_t k = 0; k < K; ++k)
          expect[i * N + j] += h(a, i * K + k) * h(b, c.transposed_b ? j * K + k : k * N + j);
      }
    }
    std::vector<autotune::Config> configs = random_configs(task, 25);
    for (const autotune::Config &cfg : configs) {
      SCOPED_TRACE(cfg.to_string());
      ir::LoweredFunc f = task.lower(cfg, "k");
      ASSERT_EQ(f.params.size(), 3u);
      for (const ir::LoweredFunc &g : {f, codegen::cuda_kernel_ir(f)}) {
        std::vector<deploy::Tensor> args = {testing::clone(a), testing::clone(b),
                                            testing::make_tensor({M, N}, f.params[2].dtype)};
        args = testing::run_interp(g, args);
        for (int64_t i = 0; i < M * N; ++i) {
          const double got = f32_out ? static_cast<const float *>(args[2].data())[i] : h(args[2], i);
          ASSERT_NEAR(got, expect[i], c.tol) << i;
        }
      }
    }
  }
  Task task("dense.cuda", cases[0].args, cuda_target());
  const autotune::Config staged = task.space().from_values(
      {{"tile_k", Json::array_of(std::vector<int64_t>{2, 8})}, {"vectorize", Json(int64_t{4})}});
  const std::string src = codegen::codegen_cuda(task.lower(staged, "k"));
  EXPECT_NE(src.find("*reinterpret_cast<uint2*>(&data_shared["), std::string::npos) << src;
  expect_compiles(task, 3);
}

// softmax.cuda: a block per row, the max and the sum reduced across the block's threads through
// shared memory. Every config (the block size) on rows longer and shorter than the block, over
// the last axis, a middle axis and a 1-D tensor, log-softmax included.
TEST(CudaTemplates, EveryConfigOfSoftmaxMatchesTheUnscheduledCompute) {
  const std::vector<std::string> workloads = {
      R"({"data": {"shape": [4, 37]}})",
      R"({"data": {"shape": [3, 5, 6]}, "axis": 1})",
      R"({"data": {"shape": [2, 70]}, "log": true})",
      R"({"data": {"shape": [40]}})",
  };
  for (const std::string &args : workloads) {
    SCOPED_TRACE(args);
    Task task("softmax.cuda", Json::parse(args), cuda_target());
    const int n = static_cast<int>(task.space().count_valid());
    EXPECT_GE(n, 3);
    EXPECT_EQ(check_configs(task, task.space().enumerate(), 1e-4), n);
    expect_compiles(task, 1);
  }
  Task task("softmax.cuda", Json::parse(workloads[0]), cuda_target());
  const autotune::Config cfg =
      task.space().from_values({{"num_thread", Json(int64_t{16})}, {"row_axis", Json(int64_t{1})}});
  const ir::LoweredFunc f = task.lower(cfg, "k");
  const codegen::LaunchDims dims = codegen::launch_dims(f);
  EXPECT_EQ(dims.grid, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(dims.block, (std::array<int64_t, 3>{16, 1, 1}));
  const std::string src = codegen::codegen_cuda(f);
  EXPECT_NE(src.find("__shared__"), std::string::npos) << src;
  EXPECT_NE(src.find("__syncthreads();"), std::string::npos) << src;
}

// layer_norm.cuda: a block per row, the sum and the variance reduced across the block's threads.
// Every config on one and two normalized axes, with scale and shift, and with no leading axis.
TEST(CudaTemplates, EveryConfigOfLayerNormMatchesTheUnscheduledCompute) {
  for (const std::string &args : {
           std::string(R"({"data": {"shape": [4, 40]}})"),
           std::string(R"({"data": {"shape": [3, 5, 7]}, "axes": [1, 2], "scale": true, "center": true})"),
           std::string(R"({"data": {"shape": [2, 3, 9]}, "scale": true})"),
           std::string(R"({"data": {"shape": [6, 5]}, "axes": [0, 1]})"),
       }) {
    SCOPED_TRACE(args);
    Task task("layer_norm.cuda", Json::parse(args), cuda_target());
    const int n = static_cast<int>(task.space().count_valid());
    EXPECT_GE(n, 3);
    EXPECT_EQ(check_configs(task, task.space().enumerate(), 1e-4), n);
    expect_compiles(task, 1);
  }
}

// conv2d_nchw.cuda: output-channel, row and column tiles per block, virtual threads, register
// tiles, the padded input and the weights staged in shared memory per reduction step. 200 random
// configs with padding and a bias + ReLU epilogue, 30 with stride, 30 with groups and dilation.
TEST(CudaTemplates, Conv2dRandomConfigsMatchTheUnscheduledCompute) {
  const Json relu = Json::array({epilogue::bias_add(), epilogue::relu()});
  Json padded = Json::parse(R"({"data": {"shape": [1, 4, 6, 8]}, "kernel": {"shape": [8, 4, 3, 3]}, "padding": 1})");
  padded.set("epilogue", relu);
  const std::vector<std::pair<Json, int>> workloads = {
      {padded, 200},
      {Json::parse(R"({"data": {"shape": [2, 4, 9, 9]}, "kernel": {"shape": [6, 4, 3, 3]}, "strides": 2,
                       "dilation": 1, "padding": [1, 0, 1, 0]})"),
       30},
      {Json::parse(R"({"data": {"shape": [1, 4, 8, 8]}, "kernel": {"shape": [4, 2, 3, 3]}, "groups": 2,
                       "dilation": 2})"),
       30},
  };
  for (const auto &[args, n] : workloads) {
    SCOPED_TRACE(args.dump());
    Task task("conv2d_nchw.cuda", args, cuda_target());
    EXPECT_GT(task.space().count_valid(), 200);
    EXPECT_EQ(check_configs(task, random_configs(task, n), 1e-4), n);
    expect_compiles(task, 2);
  }
  Task task("conv2d_nchw.cuda", padded, cuda_target());
  const autotune::Config cfg = task.space().from_values({{"tile_f", Json::array_of(std::vector<int64_t>{1, 2, 2, 2})},
                                                         {"tile_y", Json::array_of(std::vector<int64_t>{2, 1, 3, 1})},
                                                         {"tile_x", Json::array_of(std::vector<int64_t>{1, 2, 4, 1})},
                                                         {"tile_rc", Json::array_of(std::vector<int64_t>{2, 2})},
                                                         {"tile_ry", Json::array_of(std::vector<int64_t>{3, 1})},
                                                         {"tile_rx", Json::array_of(std::vector<int64_t>{1, 3})}});
  EXPECT_EQ(check_configs(task, {cfg}, 1e-4), 1);
  const ir::LoweredFunc f = task.lower(cfg, "k");
  EXPECT_EQ(codegen::launch_dims(f).block, (std::array<int64_t, 3>{4, 3, 2}));
  EXPECT_EQ(codegen::launch_dims(f).grid, (std::array<int64_t, 3>{1, 2, 1}));
  const std::string src = codegen::codegen_cuda(f);
  // Four virtual threads (channels x columns) interleaved, each with its 2-channel register tile.
  EXPECT_EQ(src.find("// vthread"), std::string::npos) << src;
  EXPECT_NE(src.find("float conv2d[8];"), std::string::npos) << src;
  EXPECT_TRUE(stores_interleaved(src, "conv2d", 2)) << src;
  EXPECT_NE(src.find("__shared__"), std::string::npos) << src;
}

// depthwise_conv2d_nchw.cuda: conv2d_nchw.cuda's schedule with one input channel per group. 200
// random configs with a channel multiplier, stride and padding, 30 with dilation.
TEST(CudaTemplates, DepthwiseConv2dRandomConfigsMatchTheUnscheduledCompute) {
  const std::vector<std::pair<std::string, int>> workloads = {
      {R"({"data": {"shape": [1, 4, 9, 9]}, "kernel": {"shape": [4, 2, 3, 3]}, "strides": 2, "padding": 1})", 200},
      {R"({"data": {"shape": [2, 3, 8, 8]}, "kernel": {"shape": [3, 1, 3, 3]}, "dilation": 2, "padding": 2})", 30},
  };
  for (const auto &[args, n] : workloads) {
    SCOPED_TRACE(args);
    Task task("depthwise_conv2d_nchw.cuda", Json::parse(args), cuda_target());
    EXPECT_GT(task.space().count_valid(), 200);
    EXPECT_EQ(check_configs(task, random_configs(task, n), 1e-4), n);
    expect_compiles(task, 2);
  }
}

// conv2d_nchw_implicit_gemm.cuda: the convolution as a GEMM over K = IC·KH·KW, the im2col gather
// inlined into the staging of the A tile. ResNet-18-like layers scaled down: a 3 x 3 stride-2
// convolution with padding whose K (3 x 3 x 3 = 27) is no multiple of a power-of-two step, with a
// bias + ReLU epilogue (200 random configs); a 1 x 1 stride-2 downsample and a 3 x 3 stride-1 layer
// over a batch of two (30 each).
TEST(CudaTemplates, Conv2dImplicitGemmRandomConfigsMatchTheUnscheduledCompute) {
  const Json relu = Json::array({epilogue::bias_add(), epilogue::relu()});
  Json stem = Json::parse(R"({"data": {"shape": [1, 3, 16, 16]}, "kernel": {"shape": [8, 3, 3, 3]}, "strides": 2,
                              "padding": 1})");
  stem.set("epilogue", relu);
  const std::vector<std::pair<Json, int>> workloads = {
      {stem, 200},
      {Json::parse(R"({"data": {"shape": [1, 8, 8, 8]}, "kernel": {"shape": [16, 8, 1, 1]}, "strides": 2})"), 30},
      {Json::parse(R"({"data": {"shape": [2, 4, 6, 6]}, "kernel": {"shape": [6, 4, 3, 3]}, "padding": [1, 0, 1, 0]})"),
       30},
  };
  for (const auto &[args, n] : workloads) {
    SCOPED_TRACE(args.dump());
    Task task("conv2d_nchw_implicit_gemm.cuda", args, cuda_target());
    // The GEMM's compute (im2col and the weights as [K, OC]) is the direct convolution's.
    EXPECT_LE(diff_from_template(task, "conv2d_nchw.cuda", args), 1e-4);
    EXPECT_GT(task.space().count_valid(), 200);
    const std::vector<autotune::Config> configs = random_configs(task, n);
    EXPECT_EQ(check_configs(task, configs, 1e-4), n);
    expect_compiles(task, 2);
    if (n < 200) continue;
    // Virtual threads, several threads, several reduction steps and double buffering all come up.
    int vthreads = 0, threads = 0, steps = 0, doubled = 0;
    for (const auto &cfg : configs) {
      const auto f = cfg.split("tile_f"), y = cfg.split("tile_y"), x = cfg.split("tile_x"), k = cfg.split("tile_k");
      vthreads += f[1] * y[1] * x[1] > 1;
      threads += f[2] * y[2] * x[2] > 1;
      steps += k[0] > 1;
      doubled += cfg.choice_bool("double_buffer") && k[0] > 1;
    }
    EXPECT_GT(vthreads, 50);
    EXPECT_GT(threads, 50);
    EXPECT_GT(steps, 50);
    EXPECT_GT(doubled, 20);
  }
  // The A tile in shared memory is the M tile (2 rows x 4 columns) by the K step (9): no halo, and
  // no im2col buffer outside it; the weights' tile is the K step by the 4 output channels.
  Task task("conv2d_nchw_implicit_gemm.cuda", stem, cuda_target());
  const autotune::Config cfg = task.space().from_values({{"tile_f", Json::array_of(std::vector<int64_t>{2, 1, 2, 2})},
                                                         {"tile_y", Json::array_of(std::vector<int64_t>{4, 1, 2, 1})},
                                                         {"tile_x", Json::array_of(std::vector<int64_t>{2, 1, 4, 1})},
                                                         {"tile_k", Json::array_of(std::vector<int64_t>{3, 9})}});
  EXPECT_EQ(check_configs(task, {cfg}, 1e-4), 1);
  const ir::LoweredFunc f = task.lower(cfg, "k");
  EXPECT_EQ(codegen::launch_dims(f).block, (std::array<int64_t, 3>{4, 2, 2}));
  EXPECT_EQ(codegen::launch_dims(f).grid, (std::array<int64_t, 3>{2, 4, 2}));
  EXPECT_EQ(codegen::shared_memory_bytes(f), (2 * 4 * 9 + 9 * 4) * 4);
  const std::string src = codegen::codegen_cuda(f);
  EXPECT_NE(src.find("__shared__ __align__(16) float data_im2col_shared[72];"), std::string::npos) << src;
  EXPECT_NE(src.find("__shared__ __align__(16) float kernel_gemm_shared[36];"), std::string::npos) << src;
}

// A grouped convolution is not a single GEMM: the template refuses it, naming the direct one.
TEST(CudaTemplates, Conv2dImplicitGemmRefusesGroups) {
  const Json args = Json::parse(R"({"data": {"shape": [1, 4, 8, 8]}, "kernel": {"shape": [4, 2, 3, 3]}, "groups": 2})");
  try {
    Task task("conv2d_nchw_implicit_gemm.cuda", args, cuda_target());
    FAIL() << "a grouped convolution was accepted";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("groups = 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("conv2d_nchw.cuda"), std::string::npos) << e.what();
  }
}

// reduce.cuda: one thread per output, or a block per group of outputs of the last output axis with
// each output reduced across the block's threads through shared memory. Every config on a sum over
// the last axis, a global average pool (a mean over H and W, then a bias and ReLU), a max over a
// middle axis, a min over the leading axis, a sum of a whole vector and three rows of many outputs
// per block: more than 200 configs of the block form in all.
TEST(CudaTemplates, EveryConfigOfReduceMatchesTheUnscheduledCompute) {
  const Json relu = Json::array({epilogue::bias_add(), epilogue::relu()});
  Json pool = Json::parse(R"({"data": {"shape": [2, 8, 7, 7]}, "axes": [2, 3], "op": "mean"})");
  pool.set("epilogue", relu);
  const std::vector<Json> workloads = {
      Json::parse(R"({"data": {"shape": [4, 6, 50]}, "axes": 2})"),
      pool,
      Json::parse(R"({"data": {"shape": [3, 40, 5]}, "axes": 1, "op": "max"})"),
      Json::parse(R"({"data": {"shape": [64, 3]}, "axes": 0, "op": "min", "keepdims": true})"),
      Json::parse(R"({"data": {"shape": [300]}})"),
      Json::parse(R"({"data": {"shape": [2, 12, 256]}, "axes": -1})"),
      Json::parse(R"({"data": {"shape": [24, 128]}, "axes": 1})"),
      Json::parse(R"({"data": {"shape": [2, 16, 100]}, "axes": 2, "op": "mean"})"),
  };
  int block_configs = 0;
  for (const Json &args : workloads) {
    SCOPED_TRACE(args.dump());
    Task task("reduce.cuda", args, cuda_target());
    const std::vector<autotune::Config> configs = task.space().enumerate();
    EXPECT_EQ(check_configs(task, configs, 1e-4), static_cast<int>(configs.size()));
    for (const auto &cfg : configs) block_configs += cfg.choice_string("schedule") == "block_per_output";
    expect_compiles(task, 3);
  }
  EXPECT_GE(block_configs, 200);

  // The pool's default: a block per output (16 outputs), 32 threads reducing its 49 elements.
  Task task("reduce.cuda", pool, cuda_target());
  const autotune::Config def = task.default_config();
  EXPECT_EQ(def.choice_string("schedule"), "block_per_output");
  EXPECT_EQ(codegen::launch_dims(task.lower(def, "k")).grid, (std::array<int64_t, 3>{16, 1, 1}));
  EXPECT_EQ(codegen::launch_dims(task.lower(def, "k")).block, (std::array<int64_t, 3>{32, 1, 1}));
  // Four outputs a block, 16 threads each: 4 blocks of 16 x 4 threads, the partial sums in shared
  // memory (16 x 4) combined after a barrier.
  const autotune::Config four = task.space().from_values({{"schedule", Json("block_per_output")},
                                                          {"num_thread", Json(int64_t{16})},
                                                          {"outputs_per_block", Json(int64_t{4})}});
  const ir::LoweredFunc f = task.lower(four, "k");
  EXPECT_EQ(codegen::launch_dims(f).grid, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(codegen::launch_dims(f).block, (std::array<int64_t, 3>{16, 4, 1}));
  const std::string src = codegen::codegen_cuda(f);
  EXPECT_NE(src.find("__syncthreads();"), std::string::npos) << src;
  EXPECT_GE(codegen::shared_memory_bytes(f), 16 * 4 * 4);
  // The one-thread form stays reachable and is the default of a short reduction.
  Task small("reduce.cuda", Json::parse(R"({"data": {"shape": [40, 6]}, "axes": 1})"), cuda_target());
  EXPECT_EQ(small.default_config().choice_string("schedule"), "thread_per_output");
  EXPECT_EQ(check_configs(small, {small.default_config()}, 1e-4), 1);
}

// pool2d.cuda: one thread per output, or tiles of rows x columns per block with the padded input of
// their windows staged in shared memory. Every config on ResNet-18's 3 x 3 stride-2 max pool
// (padding 1), an average pool with padding counted out and an epilogue, a dilated max pool in
// ceil mode and a 2 x 2 stride-2 average pool: more than 200 configs of the tiled form in all.
TEST(CudaTemplates, EveryConfigOfPool2dMatchesTheUnscheduledCompute) {
  const Json relu = Json::array({epilogue::bias_add(), epilogue::relu()});
  Json avg = Json::parse(R"({"data": {"shape": [1, 3, 24, 24]}, "kernel": 3, "strides": 1, "padding": 1,
                             "pool_type": "avg", "count_include_pad": false})");
  avg.set("epilogue", relu);
  const std::vector<Json> workloads = {
      Json::parse(R"({"data": {"shape": [1, 2, 72, 72]}, "kernel": 3, "strides": 2, "padding": 1,
                      "pool_type": "max"})"),
      avg,
      Json::parse(R"({"data": {"shape": [2, 2, 11, 11]}, "kernel": 2, "strides": 2, "dilation": 2,
                      "ceil_mode": true, "pool_type": "max"})"),
      Json::parse(R"({"data": {"shape": [1, 2, 48, 48]}, "kernel": 2, "strides": 2, "pool_type": "avg"})"),
  };
  int tiled = 0;
  for (const Json &args : workloads) {
    SCOPED_TRACE(args.dump());
    Task task("pool2d.cuda", args, cuda_target());
    const std::vector<autotune::Config> configs = task.space().enumerate();
    EXPECT_EQ(check_configs(task, configs, 1e-4), static_cast<int>(configs.size()));
    for (const auto &cfg : configs) tiled += cfg.choice_string("schedule") == "tiled";
    expect_compiles(task, 3);
  }
  EXPECT_GE(tiled, 200);
  // ResNet-18's max pool, tiles of 4 x 12 outputs: the 9 x 25 padded input rows and columns their
  // windows cover are staged once per block.
  Task task("pool2d.cuda", workloads[0], cuda_target());
  const autotune::Config cfg = task.space().from_values({{"schedule", Json("tiled")},
                                                         {"num_thread", Json(int64_t{32})},
                                                         {"tile_y", Json::array_of(std::vector<int64_t>{9, 4})},
                                                         {"tile_x", Json::array_of(std::vector<int64_t>{3, 12})}});
  const ir::LoweredFunc f = task.lower(cfg, "k");
  EXPECT_EQ(check_configs(task, {cfg}, 1e-4), 1);
  EXPECT_EQ(codegen::launch_dims(f).grid, (std::array<int64_t, 3>{54, 1, 1}));
  EXPECT_EQ(codegen::launch_dims(f).block, (std::array<int64_t, 3>{12, 4, 1}));
  EXPECT_EQ(codegen::shared_memory_bytes(f), 9 * 25 * 4);
}

TEST(CudaTemplates, SpacesKeepToTheBlockLimits) {
  // A large matmul: splits that would need more than 1024 threads or 48 KiB of shared memory are
  // not in the space.
  Json args = Json::parse(R"({"a": {"shape": [2048, 2048]}, "b": {"shape": [2048, 2048]}})");
  Task task("matmul.cuda", args, cuda_target());
  EXPECT_LT(task.space().count_valid(), task.space().size());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    autotune::Config cfg = task.space().sample(rng);
    const auto y = cfg.split("tile_y"), x = cfg.split("tile_x"), k = cfg.split("tile_k");
    EXPECT_LE(y[2] * x[2], 1024) << cfg.to_string();
    EXPECT_LE(y[1] * x[1], 16) << cfg.to_string();
    // A staged tile of A and of B per virtual thread.
    EXPECT_LE(y[1] * x[1] * (y[2] * y[3] + x[2] * x[3]) * k[1] * 4, 48 * 1024) << cfg.to_string();
    if (i < 20) {
      EXPECT_LE(codegen::shared_memory_bytes(task.lower(cfg, "k")), 48 * 1024) << cfg.to_string();
    }
  }
  // ResNet-18's 3 x 3 convolutions of 128 channels at 28 x 28 as an implicit GEMM (K = 1152): the
  // default config and random ones launch within the limits.
  Task conv(
      "conv2d_nchw_implicit_gemm.cuda",
      Json::parse(R"({"data": {"shape": [1, 128, 28, 28]}, "kernel": {"shape": [128, 128, 3, 3]}, "padding": 1})"),
      cuda_target());
  EXPECT_LT(conv.space().count_valid(), conv.space().size());
  for (int i = 0; i < 20; ++i) {
    const autotune::Config cfg = i == 0 ? conv.default_config() : conv.space().sample(rng);
    const ir::LoweredFunc f = conv.lower(cfg, "k");
    EXPECT_LE(codegen::launch_dims(f).threads_per_block(), 1024) << cfg.to_string();
    EXPECT_LE(codegen::shared_memory_bytes(f), 48 * 1024) << cfg.to_string();
  }
}

}  // namespace
}  // namespace kiln::ops
