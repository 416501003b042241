// conv1x1_depthwise_nchwc.x86 (MobileNetV2's expansion and depthwise layers as one kernel) against
// the two kernels it replaces, conv2d_nchwc.x86 (1x1, bias + ReLU6) then
// depthwise_conv2d_nchwc.x86 (bias + ReLU6), each at its default config, float32, batch 1, on the
// threads of Kiln's pool (KILN_NUM_THREADS). The separate kernels take the fused default's blocks
// (the widest vector blocks of at most two vectors, as the graph's layout pass gives them). One line per case:
//   fused_conv case=<ic>-><c>@<hw>s<stride> fused_us=<t> expand_us=<t> depthwise_us=<t>
//       separate_us=<t> speedup=<separate / fused> max_diff=<d> config=<fused config>
// Each kernel is timed with bench::time_call (the smallest of 3 medians), the three in turn for
// --rounds rounds (default 3), and the fastest round kept. max_diff compares the fused output with
// the two kernels'.
// Options: --cases SUBSTR (match on the case name), --rounds N, --target "llvm -mcpu=...".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/common/layer.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"

namespace {

using namespace kiln;
using contracts::Json;

struct Case {
  int64_t ic, c, hw, stride;
  std::string name() const {
    return std::to_string(ic) + "->" + std::to_string(c) + "@" + std::to_string(hw) + "s" + std::to_string(stride);
  }
};

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

Json relu6() { return Json::array({ops::epilogue::bias_add(), ops::epilogue::clip(0, 6)}); }

deploy::Tensor random_tensor(const te::Tensor &t, uint64_t seed) {
  std::vector<int64_t> shape;
  for (const auto &d : t.shape()) shape.push_back(ir::as_const_int(d).value_or(1));
  deploy::Tensor x = deploy::Tensor::empty(shape, ir::to_deploy_dtype(t.dtype()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
  return x;
}

// A task at its default config, JIT-compiled, with its output allocated.
struct Kernel {
  Kernel(const std::string &tmpl, const Json &args, const ops::Target &target, const codegen::LLVMBuildOptions &opt)
      : task(tmpl, args, target), config(task.default_config()) {
    ops::Instance inst = task.instantiate(config);
    compute = inst.compute;
    module = std::make_unique<codegen::LLVMModule>(task.lower(config, "op"), opt);
    output = random_tensor(compute.outputs[0], 0);
  }
  void run(const std::vector<deploy::Tensor> &inputs) {
    std::vector<deploy::Tensor> args = inputs;
    args.push_back(output);
    module->call("op", args);
  }
  ops::Task task;
  autotune::Config config;
  ops::Compute compute;
  std::unique_ptr<codegen::LLVMModule> module;
  deploy::Tensor output;
};

}  // namespace

int main(int argc, char **argv) {
  std::string filter, target_str = "llvm -mcpu=native";
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cases") == 0) filter = argv[i + 1];
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--target") == 0) target_str = argv[i + 1];
  }
  // MobileNetV2's pairs (torchvision): the expansion of each block with expand ratio 6, by stage.
  const std::vector<Case> cases = {{16, 96, 112, 2}, {24, 144, 56, 1}, {24, 144, 56, 2},
                                   {32, 192, 28, 1}, {32, 192, 28, 2}, {64, 384, 14, 1},
                                   {96, 576, 14, 1}, {96, 576, 14, 2}, {160, 960, 7, 1}};
  try {
    const ops::Target target = driver::resolve_target(target_str);
    codegen::LLVMBuildOptions opt;
    opt.target = target_str;
    for (const Case &k : cases) {
      if (!filter.empty() && k.name().find(filter) == std::string::npos) continue;
      Json fa = Json::object({{"data", tensor({1, k.ic, k.hw, k.hw})},
                              {"expand_kernel", tensor({k.c, k.ic, 1, 1})},
                              {"depthwise_kernel", tensor({k.c, 1, 3, 3})},
                              {"strides", k.stride},
                              {"padding", 1},
                              {"expand_epilogue", relu6()},
                              {"epilogue", relu6()}});
      Kernel fused("conv1x1_depthwise_nchwc.x86", fa, target, opt);
      Kernel expand("conv2d_nchwc.x86",
                    Json::object({{"data", tensor({1, k.ic, k.hw, k.hw})},
                                  {"kernel", tensor({k.c, k.ic, 1, 1})},
                                  {"ic_bn", fused.config.split("tile_ic").back()},
                                  {"oc_bn", fused.config.split("tile_c").back()},
                                  {"epilogue", relu6()}}),
                    target, opt);
      const int64_t cb = expand.config.split("tile_oc").back();
      Kernel depthwise("depthwise_conv2d_nchwc.x86",
                       Json::object({{"data", tensor({1, k.c, k.hw, k.hw})},
                                     {"kernel", tensor({k.c, 1, 3, 3})},
                                     {"strides", k.stride},
                                     {"padding", 1},
                                     {"c_bn", cb},
                                     {"epilogue", relu6()}}),
                       target, opt);
      // Inputs: data, expand kernel, depthwise kernel, expand bias, depthwise bias.
      std::vector<deploy::Tensor> in;
      for (size_t i = 0; i < fused.compute.inputs.size(); ++i)
        in.push_back(random_tensor(fused.compute.inputs[i], i + 1));
      std::vector<deploy::Tensor> ein = {in[0], in[1], in[3]};
      auto din = [&] { return std::vector<deploy::Tensor>{expand.output, in[2], in[4]}; };
      fused.run(in);
      expand.run(ein);
      depthwise.run(din());
      double diff = 0;
      for (int64_t i = 0; i < fused.output.numel(); ++i) {
        diff = std::max(diff, static_cast<double>(
                                  std::fabs(fused.output.data_as<float>()[i] - depthwise.output.data_as<float>()[i])));
      }
      double tf = 1e30, te_ = 1e30, td = 1e30;
      const std::vector<deploy::Tensor> dargs = din();
      for (int r = 0; r < rounds; ++r) {
        tf = std::min(tf, bench::time_call([&] { fused.run(in); }));
        te_ = std::min(te_, bench::time_call([&] { expand.run(ein); }));
        td = std::min(td, bench::time_call([&] { depthwise.run(dargs); }));
      }
      std::printf(
          "fused_conv case=%s fused_us=%.1f expand_us=%.1f depthwise_us=%.1f separate_us=%.1f speedup=%.3f "
          "max_diff=%.2g config=%s\n",
          k.name().c_str(), tf * 1e6, te_ * 1e6, td * 1e6, (te_ + td) * 1e6, (te_ + td) / tf, diff,
          fused.config.to_string().c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "fused_conv_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
