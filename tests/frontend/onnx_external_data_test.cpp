// A model whose weights live in an external data file (how ONNX stores models over 2 GiB) imports
// and computes what numpy computes; the weights file cut short is an error naming it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "compiler/driver/graph_executor.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "deploy/npy.h"
#include "tests/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(OnnxExternalData, WeightsInAnExternalFileImportAndComputeTheReference) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is missing";
  test::TempDir dir;
  const std::string cmd = "/usr/bin/python3 " KILN_EXTERNAL_DATA_SCRIPT " " + dir.path();
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "numpy or onnx cannot be imported";
  ASSERT_EQ(status, 0) << cmd;
  ASSERT_TRUE(fs::exists(dir.path() + "/weights.bin"));

  graph::Graph g = frontend::onnx::import_model(dir.path() + "/model.onnx");
  EXPECT_EQ(g.parameter_count(), 64 * 32 + 32);
  driver::GraphExecutor ex(std::move(g));
  const deploy::Tensor x = deploy::read_npy(dir.path() + "/x.npy");
  const deploy::Tensor want = deploy::read_npy(dir.path() + "/want.npy");
  const deploy::Tensor got = ex.run(std::vector<deploy::Tensor>{x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], 1e-4 * (1 + std::fabs(want.data_as<float>()[i])));

  // The weights file cut short: an ImportError naming the file.
  fs::resize_file(dir.path() + "/weights.bin", 100);
  try {
    frontend::onnx::import_model(dir.path() + "/model.onnx");
    FAIL() << "a short external data file was accepted";
  } catch (const frontend::onnx::ImportError &e) {
    EXPECT_NE(std::string(e.what()).find("weights.bin"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
