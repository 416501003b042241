// Bad input to the ONNX importer: files that are not models, models Kiln cannot take, and values
// that do not fit. Each one must be refused with a user error (ImportError and the like) whose
// message names the file, the node or the value; an InternalError, another exception, a crash or a
// hang fails the test. The models are written at test time by make_bad_models.py; without the onnx
// Python package the model tests are skipped.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "contracts/error.h"
#include "tests/temp_dir.h"

namespace kiln::frontend::onnx {
namespace {

namespace fs = std::filesystem;

constexpr const char *kPython = "/usr/bin/python3";
constexpr int kNoOnnx = 77;  // make_bad_models.py: the onnx package cannot be imported

// Runs `body`, which must throw a kiln::UserError whose message holds every one of `needles`;
// returns the message.
std::string user_error_of(const std::function<void()> &body, std::initializer_list<std::string> needles) {
  std::string message;
  try {
    body();
    ADD_FAILURE() << "no error";
    return "";
  } catch (const UserError &e) {
    message = e.what();
  } catch (const InternalError &e) {
    ADD_FAILURE() << "an internal error, not a user error: " << e.what();
    return "";
  } catch (const std::exception &e) {
    ADD_FAILURE() << "an exception that is not a user error: " << e.what();
    return "";
  }
  for (const std::string &n : needles)
    EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' not in: " << message;
  return message;
}

class OnnxImportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::TempDir>("kiln_onnx_import");
    models_ = dir_->file("models");
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      execl(kPython, kPython, KILN_MAKE_BAD_MODELS_SCRIPT, models_.c_str(), static_cast<char *>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
      script_status_ = -1;
      return;
    }
    script_status_ = WEXITSTATUS(status);
    // A file next to the models' folder, for external data that points outside it.
    std::ofstream(dir_->file("weights.bin"), std::ios::binary) << std::string(24, '\0');
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (script_status_ == kNoOnnx) GTEST_SKIP() << kPython << " cannot import onnx: the bad models are not written";
    ASSERT_EQ(script_status_, 0) << "make_bad_models.py failed";
  }

  static std::string model(const std::string &name) { return models_ + "/" + name; }

  // Imports `name` and expects a user error naming the file and each of `needles`.
  static std::string import_error(const std::string &name, std::initializer_list<std::string> needles) {
    const std::string path = model(name);
    std::string message = user_error_of([&] { import_model(path); }, {path});
    // The rest of the message, without the file's name (which holds words such as "perm" too).
    std::string rest = message;
    for (size_t p = rest.find(path); p != std::string::npos; p = rest.find(path)) rest.erase(p, path.size());
    for (const std::string &n : needles)
      EXPECT_NE(rest.find(n), std::string::npos) << "'" << n << "' not in: " << message;
    return message;
  }

  static std::unique_ptr<test::TempDir> dir_;
  static std::string models_;
  static int script_status_;
};

std::unique_ptr<test::TempDir> OnnxImportTest::dir_;
std::string OnnxImportTest::models_;
int OnnxImportTest::script_status_ = -1;

TEST_F(OnnxImportTest, TheGoodModelImports) {
  graph::Graph g = import_model(model("relu.onnx"));
  EXPECT_EQ(g.nodes().size(), 1u);
}

TEST_F(OnnxImportTest, TruncatedModelIsRefused) { import_error("truncated.onnx", {"not a valid ONNX model"}); }

TEST_F(OnnxImportTest, RandomBytesAreRefused) { import_error("random.onnx", {}); }

TEST_F(OnnxImportTest, AnImageIsRefused) { import_error("image.onnx", {"not a valid ONNX model"}); }

TEST_F(OnnxImportTest, AnEmptyFileIsRefused) { import_error("empty.onnx", {"empty"}); }

TEST_F(OnnxImportTest, AFolderIsRefused) { import_error("folder.onnx", {"is a directory"}); }

TEST_F(OnnxImportTest, AMissingFileIsRefused) { import_error("no_such_model.onnx", {"cannot open"}); }

TEST_F(OnnxImportTest, InspectRefusesWhatIsNotAModel) {
  for (const char *name : {"truncated.onnx", "image.onnx", "folder.onnx"}) {
    const std::string path = model(name);
    user_error_of([&] { inspect_model(path); }, {path});
  }
}

TEST_F(OnnxImportTest, OpsetAbove17IsRefused) { import_error("opset18.onnx", {"opset 18", "17"}); }

TEST_F(OnnxImportTest, ACycleNamesTheNodeAndValue) { import_error("cycle.onnx", {"node 'node_a'", "'b_out'"}); }

TEST_F(OnnxImportTest, AMissingInitializerNamesTheNodeAndValue) {
  import_error("missing_initializer.onnx", {"node 'add_weight'", "'weight'"});
}

TEST_F(OnnxImportTest, GatherAxisOutOfRange) { import_error("gather_axis.onnx", {"node 'gather'", "axis 7"}); }

TEST_F(OnnxImportTest, GatherConstantIndexOutOfRange) {
  import_error("gather_index.onnx", {"node 'gather_far'", "index 100000000", "extent 2"});
}

TEST_F(OnnxImportTest, TransposeRepeatedPerm) {
  import_error("transpose_perm.onnx", {"node 'transpose'", "perm [0,0]"});
}

TEST_F(OnnxImportTest, ConvGroupNotDividingChannels) { import_error("conv_group.onnx", {"node 'conv'", "group 2"}); }

TEST_F(OnnxImportTest, ResizeNegativeScale) { import_error("resize_scale.onnx", {"node 'resize'", "scales"}); }

TEST_F(OnnxImportTest, HugeInitializerWithLittleDataIsRefusedWithoutAllocating) {
  import_error("huge_initializer.onnx", {"initializer 'huge'", "16 bytes"});
}

TEST_F(OnnxImportTest, ExternalDataOutsideTheModelFolderIsRefused) {
  ASSERT_TRUE(fs::exists(dir_->file("weights.bin")));
  import_error("external_parent.onnx", {"initializer 'w'", "../weights.bin", "inside the model's folder"});
  import_error("external_absolute.onnx", {"initializer 'w'", "/etc/passwd", "inside the model's folder"});
}

TEST_F(OnnxImportTest, MissingExternalDataFile) {
  import_error("external_missing.onnx", {"initializer 'w'", "missing_weights.bin"});
}

TEST_F(OnnxImportTest, UnknownDimensionNamesTheInputAndDimension) {
  import_error("dynamic_batch.onnx", {"input 'x'", "batch", "--input-shape"});
  ImportOptions options;
  options.input_shapes["x"] = {4, 3};
  const graph::Graph g = import_model(model("dynamic_batch.onnx"), options);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).type.shape, (std::vector<int64_t>{4, 3}));
}

TEST_F(OnnxImportTest, EveryUnsupportedOpIsListedInOneError) {
  try {
    import_model(model("two_unsupported.onnx"));
    FAIL() << "no error";
  } catch (const UnsupportedOpsError &e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(model("two_unsupported.onnx")), std::string::npos) << message;
    EXPECT_NE(message.find("NonMaxSuppression (opset 13, 2 nodes)"), std::string::npos) << message;
    EXPECT_NE(message.find("StringNormalizer (opset 13, 1 node)"), std::string::npos) << message;
    ASSERT_EQ(e.ops().size(), 2u);
  }
  const ModelInfo info = inspect_model(model("two_unsupported.onnx"));
  EXPECT_EQ(info.unsupported.size(), 2u);
}

TEST_F(OnnxImportTest, NestedSubgraphsAreReportedAsUnsupported) {
  try {
    import_model(model("nested_if.onnx"));
    FAIL() << "no error";
  } catch (const UnsupportedOpsError &e) {
    ASSERT_EQ(e.ops().size(), 1u);
    EXPECT_EQ(e.ops()[0].op_type, "If");
  }
}

TEST_F(OnnxImportTest, AConstantTooLargeToFoldIsRefusedBeforeAllocating) {
  import_error("expand_huge.onnx", {"node 'expand'", "float32[100000,100000]", "40000000000 bytes"});
}

TEST_F(OnnxImportTest, AnInitializerWhoseSizeOverflowsIsRefused) {
  import_error("initializer_overflow.onnx", {"initializer 'overflow'", "overflows"});
  const std::string path = model("initializer_overflow.onnx");
  user_error_of([&] { inspect_model(path); }, {path, "initializer 'overflow'", "overflows"});
}

TEST_F(OnnxImportTest, ShapesWhoseSizeOverflowsAreRefused) {
  import_error("input_too_large.onnx", {"input 'x'", "too large"});
  import_error("tile_too_large.onnx", {"node 'tile'", "too large"});
}

TEST_F(OnnxImportTest, OldClipOnIntegersIsRefused) { import_error("clip_int.onnx", {"node 'clip'", "int32"}); }

TEST_F(OnnxImportTest, CastLikeWithoutItsSecondInputIsRefused) {
  import_error("castlike_one_input.onnx", {"node 'castlike'", "input 1"});
}

TEST_F(OnnxImportTest, AnInputOfTheWrongShapeNamesTheInput) {
  driver::GraphExecutor ex(import_model(model("relu.onnx")));
  deploy::Tensor wrong = deploy::Tensor::empty({3, 2}, deploy::DType::of<float>());
  user_error_of([&] { ex.run(std::map<std::string, deploy::Tensor>{{"x", wrong}}); }, {"'x'"});
  try {
    ex.run(std::map<std::string, deploy::Tensor>{{"x", wrong}});
  } catch (const driver::ExecutionError &) {
  } catch (const std::exception &e) {
    ADD_FAILURE() << "not an ExecutionError: " << e.what();
  }
}

// Tensor files (.pb) that are not TensorProtos or do not hold what they declare.
TEST(OnnxTensorTest, BadTensorBytesAreRefused) {
  user_error_of([] { parse_tensor(std::string("\x89PNG\r\n\x1a\n", 8), "image.pb"); }, {"image.pb"});
  user_error_of([] { read_tensor_file("/nonexistent/input_0.pb"); }, {"/nonexistent/input_0.pb"});
}

}  // namespace
}  // namespace kiln::frontend::onnx
