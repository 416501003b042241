// Real architectures through the ONNX importer and the reference executor, checked against torch:
// make_models.py exports torchvision's resnet18, mobilenet_v2, squeezenet1_1 and shufflenet_v2_x1_0
// and a small BERT-style encoder with random seeded weights (biases and BatchNorm statistics
// included), an input and the float64 reference output; each test imports one model, runs it and
// compares. The export is cached in the build tree; without torch the tests are skipped.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "tests/frontend/make_models.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::kNoTorch;
using test::make_model;
constexpr const char *kPython = test::kModelsPython;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t argmax(const float *p, int64_t n) { return std::max_element(p, p + n) - p; }

enum class Kind { Classifier, Encoder };

void check_model(const std::string &model, Kind kind) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: cannot export " << model;
  const int status = make_model(model);
  if (status == kNoTorch)
    GTEST_SKIP() << kPython << " cannot import torch, torchvision or onnx: " << model << " not tested";
  ASSERT_EQ(status, 0) << "make_models.py " << model << " failed";
  const fs::path dir = fs::path(KILN_MODELS_DIR) / model;

  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  const deploy::Tensor want = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());

  auto start = std::chrono::steady_clock::now();
  driver::GraphExecutor ex(frontend::onnx::import_model((dir / "model.onnx").string()));
  const double compile_s = seconds_since(start);
  ASSERT_EQ(ex.graph().inputs().size(), 1u);

  start = std::chrono::steady_clock::now();
  const std::vector<deploy::Tensor> outputs = ex.run(std::vector<deploy::Tensor>{input});
  const double run_s = seconds_since(start);
  ASSERT_EQ(outputs.size(), 1u);
  const deploy::Tensor &got = outputs[0];
  ASSERT_EQ(got.dtype(), deploy::DType::of<float>());
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_TRUE(got.is_contiguous());

  // The error is the largest |got - want| relative to the largest |want|: the reference is float64
  // rounded to float32, so float32 accumulation in long reductions is the only expected difference,
  // and it scales with the output's magnitude, not with each element's.
  const float *g = got.data_as<float>(), *w = want.data_as<float>();
  double max_abs = 0, max_want = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(g[i]) - w[i]));
    max_want = std::max(max_want, std::fabs(static_cast<double>(w[i])));
  }
  ASSERT_GT(max_want, 0) << "the reference output is zero";
  const double max_err = max_abs / max_want;

  const auto &stats = ex.stats();
  std::printf("model %s nodes=%d kernels=%d compile_s=%.2f run_s=%.3f max_rel_err=%.3g\n", model.c_str(), stats.nodes,
              stats.kernels, compile_s, run_s, max_err);
  std::fflush(stdout);
  ::testing::Test::RecordProperty("nodes", stats.nodes);
  ::testing::Test::RecordProperty("kernels", stats.kernels);
  ::testing::Test::RecordProperty("max_rel_err", std::to_string(max_err));

  EXPECT_LE(max_err, 1e-4) << model << ": max |got - want| " << max_abs << " against max |want| " << max_want;
  if (kind == Kind::Classifier) {
    ASSERT_EQ(want.ndim(), 2);
    EXPECT_EQ(argmax(g, want.numel()), argmax(w, want.numel())) << model << ": the top class differs";
  }

  // The graph passes keep the model's outputs: the optimized graph against the same reference.
  driver::GraphExecutor opt(driver::optimize_graph(ex.graph(), driver::GraphPipelineOptions{}));
  const std::vector<deploy::Tensor> opt_out = opt.run(std::vector<deploy::Tensor>{input});
  ASSERT_EQ(opt_out.size(), 1u);
  ASSERT_EQ(opt_out[0].shape(), want.shape());
  const float *o = opt_out[0].data_as<float>();
  double opt_abs = 0;
  for (int64_t i = 0; i < want.numel(); ++i) opt_abs = std::max(opt_abs, std::fabs(static_cast<double>(o[i]) - w[i]));
  std::printf("model %s optimized: nodes=%d kernels=%d max_rel_err=%.3g\n", model.c_str(), opt.stats().nodes,
              opt.stats().kernels, opt_abs / max_want);
  EXPECT_LE(opt_abs / max_want, 1e-4) << model << " after the graph passes";
  // The passes add no nodes but the layout transforms between NCHW ops and blocked convolutions.
  int transforms = 0;
  for (const auto &n : opt.graph().nodes()) transforms += n.op == "LayoutTransform" ? 1 : 0;
  EXPECT_LE(opt.stats().nodes - transforms, stats.nodes);
  if (model == "resnet18") {
    // Each conv with its ReLU (and each residual add with the ReLU after it) is one kernel.
    // (FusedConv, or the blocked ConvNCHWc of the layout pass carrying the same epilogue.)
    int fused = 0;
    for (const auto &n : opt.graph().nodes()) {
      fused += n.op == "FusedConv" || (n.op == "ConvNCHWc" && n.attr_string("epilogue", "[]") != "[]") ? 1 : 0;
    }
    EXPECT_EQ(fused, 17) << graph::print(opt.graph());
    EXPECT_LT(opt.stats().nodes, stats.nodes - 15);
  }
}

TEST(OnnxModels, Resnet18) { check_model("resnet18", Kind::Classifier); }
TEST(OnnxModels, MobilenetV2) { check_model("mobilenet_v2", Kind::Classifier); }
TEST(OnnxModels, Squeezenet11) { check_model("squeezenet1_1", Kind::Classifier); }
TEST(OnnxModels, ShufflenetV2) { check_model("shufflenet_v2_x1_0", Kind::Classifier); }
TEST(OnnxModels, BertEncoder) { check_model("bert_encoder", Kind::Encoder); }

}  // namespace
}  // namespace kiln
