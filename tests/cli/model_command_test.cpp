// `kiln run` and `kiln inspect` run as a user would, on one of ONNX's node tests: the outputs are
// .npy files equal to the test's expected output; a file that is not a model is a message naming
// it and exit status 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/frontend/onnx/onnx_importer.h"
#include "deploy/npy.h"
#include "tests/db/process_util.h"
#include "tests/temp_dir.h"

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
namespace pt = db::testing;

bool has(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

class ModelCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is missing (Debian's libonnx-testdata)";
  }

  pt::Run kiln(const std::vector<std::string> &args) { return pt::run_program(KILN_CLI, args, dir.path()); }

  // A file that starts like a model but stops in the middle.
  std::string truncated_model() {
    std::ifstream in(model_, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string path = dir.file("truncated.onnx");
    std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    return path;
  }

  test::TempDir dir;
  const std::string node_test_ = std::string(KILN_ONNX_NODE_TEST_DIR) + "/test_relu";
  const std::string model_ = node_test_ + "/model.onnx";
};

TEST_F(ModelCommandTest, RunWritesTheExpectedOutput) {
  const std::string out_dir = dir.file("out");
  pt::Run r =
      kiln({"run", model_, "--input", "x=" + node_test_ + "/test_data_set_0/input_0.pb", "--output-dir", out_dir});
  ASSERT_EQ(r.status, 0) << r.err;
  const deploy::Tensor got = deploy::read_npy(out_dir + "/y.npy");
  const deploy::Tensor want = frontend::onnx::read_tensor_file(node_test_ + "/test_data_set_0/output_0.pb");
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0);
}

TEST_F(ModelCommandTest, InspectListsTheOps) {
  pt::Run r = kiln({"inspect", model_});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "Relu")) << r.out;
  EXPECT_TRUE(has(r.out, "1 nodes")) << r.out;
}

TEST_F(ModelCommandTest, ABadFileIsAMessageAndStatusOne) {
  const std::string bad = truncated_model();
  for (const char *command : {"run", "inspect"}) {
    std::vector<std::string> args{command, bad};
    if (std::string(command) == "run") args.insert(args.end(), {"--output-dir", dir.file("out")});
    pt::Run r = kiln(args);
    EXPECT_EQ(r.status, 1) << command << ": " << r.err;
    EXPECT_TRUE(has(r.err, bad)) << command << ": " << r.err;
    EXPECT_TRUE(has(r.err, "not a valid ONNX model")) << command << ": " << r.err;
    EXPECT_FALSE(has(r.err, "internal error")) << command << ": " << r.err;
  }
}

TEST_F(ModelCommandTest, AnInputOfTheWrongShapeIsAMessageNamingIt) {
  const std::string input = dir.file("x.npy");
  deploy::write_npy(input, deploy::Tensor::empty({2, 2}, deploy::DType::of<float>()));
  pt::Run r = kiln({"run", model_, "--input", "x=" + input, "--output-dir", dir.file("out")});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "'x'")) << r.err;
}

// `kiln compile` writes an artifact; `kiln run` recognises it by its magic (whatever its name), runs
// it through the runtime and writes the expected output; --bench prints the latency percentiles.
TEST_F(ModelCommandTest, CompileThenRunTheArtifact) {
  const std::string artifact = dir.file("relu.bin");
  pt::Run c = kiln({"compile", model_, "-o", artifact});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(has(c.out, "wrote " + artifact)) << c.out;
  EXPECT_TRUE(has(c.out, "1 kernels")) << c.out;
  EXPECT_TRUE(has(c.out, "memory plan: peak")) << c.out;
  EXPECT_TRUE(has(c.out, "0 concats without a copy")) << c.out;  // a Relu alone has no Concat

  const std::string out_dir = dir.file("out");
  pt::Run r = kiln({"run", artifact, "--input", "x=" + node_test_ + "/test_data_set_0/input_0.pb", "--output-dir",
                    out_dir, "--bench", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "compiled model")) << r.out;
  EXPECT_TRUE(has(r.out, "bench runs=3")) << r.out;
  EXPECT_TRUE(has(r.out, "p50_ms=")) << r.out;
  EXPECT_TRUE(has(r.out, "p99_ms=")) << r.out;
  const deploy::Tensor got = deploy::read_npy(out_dir + "/y.npy");
  const deploy::Tensor want = frontend::onnx::read_tensor_file(node_test_ + "/test_data_set_0/output_0.pb");
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0);

  // A wrong input and a corrupt artifact are messages and status 1.
  const std::string input = dir.file("x.npy");
  deploy::write_npy(input, deploy::Tensor::empty({2, 2}, deploy::DType::of<float>()));
  r = kiln({"run", artifact, "--input", "x=" + input, "--output-dir", out_dir});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "input 'x' is float32[2, 2]")) << r.err;
  std::string bytes;
  {
    std::ifstream in(artifact, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 10] ^= 1;
  std::ofstream(artifact, std::ios::binary | std::ios::trunc) << bytes;
  r = kiln({"run", artifact, "--output-dir", out_dir});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "is corrupt")) << r.err;
  EXPECT_FALSE(has(r.err, "internal error")) << r.err;
}

// With --db, `kiln compile` lists where each template kernel's config came from, counts the
// defaults in one line with the `kiln tune` command for them, and writes their workloads to the
// file that command reads.
TEST_F(ModelCommandTest, CompileWithADbListsTheDefaultsAndHowToTuneThem) {
  const std::string conv = std::string(KILN_ONNX_NODE_TEST_DIR) + "/test_basic_conv_with_padding/model.onnx";
  const std::string db = dir.file("kiln.db"), empty = dir.file("empty.jsonl");
  std::ofstream(empty).flush();
  ASSERT_EQ(kiln({"db", "--db", db, "import", empty}).status, 0);
  const std::string artifact = dir.file("conv.kiln");
  pt::Run c = kiln({"compile", conv, "-o", artifact, "--db", db, "--device-key", "test-cpu"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(has(c.out, "conv2d_nchw")) << c.out;
  EXPECT_TRUE(has(c.out, "0 of 1 template kernels use tuned configs from " + db +
                             "; 1 use the default config; to tune "
                             "them: kiln tune --db " +
                             db))
      << c.out;
  EXPECT_TRUE(has(c.out, "--device-key test-cpu --workloads " + artifact + ".tune.json")) << c.out;
  std::ifstream in(artifact + ".tune.json");
  const std::string list((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(list, "\"template\": \"conv2d_nchw")) << list;
}

// `kiln run model.kiln --profile N` prints one row per kernel step (its node, op and kernel) and
// the steps' sum against a plain run; --profile-json writes the same as JSON with trace events;
// a count below 1, --profile on an ONNX model and a JSON path that cannot be written are messages
// and status 1.
TEST_F(ModelCommandTest, ProfileACompiledModel) {
  const std::string artifact = dir.file("relu.kiln");
  ASSERT_EQ(kiln({"compile", model_, "-o", artifact}).status, 0);
  const std::string json_path = dir.file("profile.json");
  pt::Run r = kiln({"run", artifact, "--profile", "4", "--profile-json", json_path});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "STEP")) << r.out;
  EXPECT_TRUE(has(r.out, "MEDIAN_MS")) << r.out;
  EXPECT_TRUE(has(r.out, "Relu")) << r.out;
  EXPECT_TRUE(has(r.out, "kiln_k0")) << r.out;
  EXPECT_TRUE(has(r.out, "100.0")) << r.out;  // the one step is the whole share
  EXPECT_TRUE(has(r.out, "profile runs=4 warmup=4 steps=1 steps_sum_ms=")) << r.out;
  EXPECT_TRUE(has(r.out, "run_ms=")) << r.out;
  EXPECT_FALSE(has(r.out, "bench runs")) << r.out;

  std::ifstream in(json_path);
  ASSERT_TRUE(in) << json_path << " was not written";
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("runs"), 4);
  ASSERT_EQ(j.at("steps").size(), 1u);
  EXPECT_EQ(j.at("steps")[0].at("op"), "Relu");
  EXPECT_EQ(j.at("steps")[0].at("kernel"), "kiln_k0");
  EXPECT_DOUBLE_EQ(j.at("steps")[0].at("share").get<double>(), 1.0);
  EXPECT_GT(j.at("run_ms").get<double>(), 0);
  ASSERT_EQ(j.at("traceEvents").size(), 1u);
  EXPECT_EQ(j.at("traceEvents")[0].at("ph"), "X");
  EXPECT_EQ(j.at("traceEvents")[0].at("name"), j.at("steps")[0].at("node"));

  for (const char *bad : {"0", "-3"}) {
    r = kiln({"run", artifact, "--profile", bad});
    EXPECT_EQ(r.status, 1) << bad << ": " << r.err;
    EXPECT_TRUE(has(r.err, std::string("--profile takes a number of runs of at least 1, got ") + bad)) << r.err;
  }
  r = kiln({"run", artifact, "--profile", "2", "--profile-json", dir.file("no/such/dir/p.json")});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "--profile-json: cannot write " + dir.file("no/such/dir/p.json"))) << r.err;
  r = kiln({"run", artifact, "--profile-json", json_path});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "--profile-json needs --profile N")) << r.err;
  r = kiln({"run", model_, "--profile", "2", "--input", "x=" + node_test_ + "/test_data_set_0/input_0.pb"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "is not one")) << r.err;
  EXPECT_FALSE(has(r.err, "internal error")) << r.err;
}

// `kiln run model.kiln --json` prints exactly one JSON document whatever options come with it: the
// files --output-dir wrote, "bench" and the profile's fields together; without --json the same
// run prints the tables and lines.
TEST_F(ModelCommandTest, RunJsonIsOneDocument) {
  const std::string artifact = dir.file("relu.kiln");
  ASSERT_EQ(kiln({"compile", model_, "-o", artifact}).status, 0);
  const std::string input = "x=" + node_test_ + "/test_data_set_0/input_0.pb", out_dir = dir.file("out");
  pt::Run r =
      kiln({"run", artifact, "--input", input, "--output-dir", out_dir, "--json", "--profile", "2", "--bench", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::parse_error &e) {
    FAIL() << "stdout is not one JSON document: " << e.what() << "\n" << r.out;
  }
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j.at("outputs").size(), 1u) << r.out;
  EXPECT_EQ(j.at("outputs")[0].at("name"), "y");
  EXPECT_EQ(j.at("outputs")[0].at("type"), "float32[3,4,5]");
  EXPECT_EQ(j.at("outputs")[0].at("file"), out_dir + "/y.npy");
  EXPECT_TRUE(fs::exists(out_dir + "/y.npy"));
  EXPECT_GT(j.at("arena_bytes").get<int64_t>(), 0);
  EXPECT_EQ(j.at("bench").at("runs"), 3);
  EXPECT_TRUE(j.at("bench").contains("p99_ms")) << r.out;
  EXPECT_EQ(j.at("runs"), 2);
  ASSERT_EQ(j.at("steps").size(), 1u) << r.out;
  EXPECT_EQ(j.at("steps")[0].at("op"), "Relu");
  EXPECT_EQ(j.at("traceEvents").size(), 1u);

  // Each option alone gives its own part only.
  r = kiln({"run", artifact, "--input", input, "--json", "--profile", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.contains("outputs")) << r.out;
  EXPECT_FALSE(j.contains("bench")) << r.out;
  EXPECT_EQ(j.at("runs"), 2);
  r = kiln({"run", artifact, "--input", input, "--json", "--bench", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("bench").at("runs"), 2) << r.out;
  EXPECT_FALSE(j.contains("steps")) << r.out;

  r = kiln({"run", artifact, "--input", input, "--output-dir", out_dir, "--profile", "2", "--bench", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "compiled model")) << r.out;
  EXPECT_TRUE(has(r.out, "bench runs=3")) << r.out;
  EXPECT_TRUE(has(r.out, "profile runs=2")) << r.out;
  EXPECT_FALSE(has(r.out, "{")) << r.out;
}

// `kiln run model.onnx --bench N` needs no --output-dir: it writes no outputs, and prints the
// latency percentiles (as "bench" with --json).
TEST_F(ModelCommandTest, BenchAnOnnxModelWithoutAnOutputDir) {
  const std::string input = "x=" + node_test_ + "/test_data_set_0/input_0.pb";
  pt::Run r = kiln({"run", model_, "--input", input, "--bench", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "bench runs=2")) << r.out;
  EXPECT_FALSE(has(r.out, "OUTPUT")) << r.out;
  r = kiln({"run", model_, "--input", input, "--bench", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("bench").at("runs"), 2) << r.out;
  EXPECT_EQ(j.at("nodes"), 1) << r.out;
  EXPECT_FALSE(j.contains("outputs")) << r.out;
}

}  // namespace
}  // namespace kiln::cli
