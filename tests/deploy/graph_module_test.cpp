// Compiled-model artifacts (driver::compile_graph) loaded by deploy::GraphModule in a fresh module:
// the outputs match the reference executor on the unoptimized graph (a small graph with views and
// in-place steps, and the test models of tests/frontend/make_models.py); the memory plan stored in
// the file never lets two tensors live at the same time share bytes (recomputed here from the
// file's steps); corrupt, truncated, foreign and other-version files and wrong inputs are
// ArtifactError / GraphInputError with messages naming what is wrong; and a C program that links
// only kiln_deploy runs an artifact through the C API.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/config_lookup.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "contracts/sha256.h"
#include "deploy/artifact_format.h"
#include "deploy/graph_c_api.h"
#include "deploy/graph_module.h"
#include "tests/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using contracts::Json;
using graph::Graph;
using graph::kNoValue;
using graph::Node;
using graph::TensorType;
using graph::ValueId;

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

deploy::Tensor random_tensor(const std::vector<int64_t> &shape, uint64_t seed) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<float>());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
  return t;
}

ValueId add(Graph &g, const std::string &op, std::vector<ValueId> inputs) {
  Node n;
  n.op = op;
  n.name = g.unique_name(op);
  n.inputs = std::move(inputs);
  n.outputs = {kNoValue};
  auto types = graph::infer_types(g, n);
  return g.add_node(n, {g.unique_name(op + "_out")}, types)[0];
}

// x[2,3,4] -> Exp -> Relu (in place) -> Flatten (a view, also an output) -> Add bias -> Sigmoid
// (in place) -> output.
Graph small_graph() {
  Graph g;
  const ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  const ValueId e = add(g, "Exp", {x});
  const ValueId r = add(g, "Relu", {e});
  const ValueId f = add(g, "Flatten", {r});
  const ValueId b = g.add_constant("bias", random_tensor({12}, 3));
  const ValueId a = add(g, "Add", {f, b});
  const ValueId s = add(g, "Sigmoid", {a});
  g.add_output(s);
  g.add_output(f);
  return g;
}

// max |got - want| / max |want| (float outputs), or exact comparison of the bytes otherwise.
double relative_error(const deploy::Tensor &got, const deploy::Tensor &want) {
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.dtype(), want.dtype());
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) return 1e9;
  if (want.dtype() != deploy::DType::of<float>())
    return std::memcmp(got.data(), want.data(), want.nbytes()) == 0 ? 0 : 1e9;
  const float *g = got.data_as<float>(), *w = want.data_as<float>();
  double max_abs = 0, max_want = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(g[i]) - w[i]));
    max_want = std::max(max_want, std::fabs(static_cast<double>(w[i])));
  }
  return max_abs / std::max(max_want, 1e-30);
}

// The graph JSON of an artifact, read here from the file's layout.
Json artifact_graph(const std::string &path) {
  const std::string bytes = read_bytes(path);
  deploy::ArtifactHeader h;
  EXPECT_GE(bytes.size(), sizeof h);
  std::memcpy(&h, bytes.data(), sizeof h);
  return Json::parse(std::string_view(bytes.data() + h.graph.offset, h.graph.bytes));
}

// Pairs of arena tensors live at the same time whose bytes overlap, from the file's values and
// steps: a tensor lives from the step that writes it (inputs: from the start) to the last step that
// reads it or a view of it (graph inputs and outputs: to the end). A step that writes over an
// input read for the last time by that very step is the one allowed overlap. Returns messages.
std::vector<std::string> plan_conflicts(const Json &g) {
  const auto &values = g.at("values").as_array();
  const int end = 1 << 30;
  std::vector<int> first(values.size(), -1), last(values.size(), -1);
  auto root = [&](int64_t id) {
    const Json &v = values[static_cast<size_t>(id)];
    return v.contains("view_of") ? v.at("view_of").as_int() : id;
  };
  for (const Json &id : g.at("inputs").as_array()) {
    first[static_cast<size_t>(id.as_int())] = 0;
    last[static_cast<size_t>(id.as_int())] = end;
  }
  size_t num_nodes = 1;
  for (const Json &s : g.at("steps").as_array())
    num_nodes = std::max(num_nodes, static_cast<size_t>(s.at("index").as_int()) + 1);
  std::vector<std::vector<int64_t>> step_reads(num_nodes);  // per step, the tensors its kernel reads
  for (const Json &s : g.at("steps").as_array()) {
    if (!s.contains("kernel")) continue;
    const int index = static_cast<int>(s.at("index").as_int());
    const auto args = s.at("args").as_int_vector();
    const size_t outs = static_cast<size_t>(s.at("num_outputs").as_int());
    for (size_t a = 0; a < args.size(); ++a) {
      const size_t r = static_cast<size_t>(root(args[a]));
      if (a + outs >= args.size()) {  // a write (several, for a Concat's inputs written into it)
        first[r] = first[r] < 0 ? index : std::min(first[r], index);
        last[r] = std::max(last[r], index);
      } else {
        last[r] = std::max(last[r], index);
        step_reads[static_cast<size_t>(index)].push_back(static_cast<int64_t>(r));
      }
    }
  }
  for (const Json &id : g.at("outputs").as_array()) last[static_cast<size_t>(root(id.as_int()))] = end;
  std::vector<std::string> bad;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = i + 1; j < values.size(); ++j) {
      const Json &a = values[i], &b = values[j];
      if (first[i] < 0 || first[j] < 0 || a.contains("view_of") || b.contains("view_of")) continue;
      if (a.at("region").as_string() != "arena" || b.at("region").as_string() != "arena") continue;
      if (!(first[i] <= last[j] && first[j] <= last[i])) continue;
      const int64_t ao = a.at("offset").as_int(), bo = b.at("offset").as_int();
      const int64_t ab = a.at("bytes").as_int(), bb = b.at("bytes").as_int();
      if (!(ao < bo + bb && bo < ao + ab)) continue;
      // In place: j is written by the step that reads i for the last time (or the other way round).
      auto in_place = [&](size_t src, size_t dst) {
        const auto &reads = step_reads[static_cast<size_t>(first[dst])];
        return last[src] == first[dst] && ao == bo && ab == bb &&
               std::find(reads.begin(), reads.end(), static_cast<int64_t>(src)) != reads.end();
      };
      if (in_place(i, j) || in_place(j, i)) continue;
      bad.push_back(a.at("name").as_string() + " and " + b.at("name").as_string());
    }
  }
  return bad;
}

class GraphModuleTest : public ::testing::Test {
 protected:
  // Compiles the small graph into the temporary directory once per test.
  std::string compile_small() {
    const std::string path = dir.file("small.kiln");
    report = driver::compile_graph(small_graph(), path);
    return path;
  }
  test::TempDir dir;
  driver::GraphCompileReport report;
};

TEST_F(GraphModuleTest, TheSmallGraphMatchesTheReferenceExecutorWithViewsAndInPlaceSteps) {
  const std::string path = compile_small();
  EXPECT_EQ(report.steps, 4);  // Flatten is an alias
  EXPECT_GE(report.in_place, 1);
  deploy::GraphModule m = deploy::GraphModule::load(path);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(m.outputs().size(), 2u);
  EXPECT_EQ(m.outputs()[1].shape, (std::vector<int64_t>{2, 12}));
  driver::GraphExecutor ref(small_graph());
  for (uint64_t seed : {1, 2}) {  // twice: the second run reuses the arena
    const deploy::Tensor x = random_tensor({2, 3, 4}, seed);
    m.set_input("x", x);
    m.run();
    const auto want = ref.run(std::vector<deploy::Tensor>{x});
    EXPECT_LE(relative_error(m.get_output(0), want[0]), 1e-6);
    EXPECT_LE(relative_error(m.get_output(1), want[1]), 1e-6);
  }
  EXPECT_TRUE(plan_conflicts(artifact_graph(path)).empty());
}

// Two artifacts open at once in one process each run their own kernels (their libraries share
// function names: loading the second must not hand back the first one's library).
TEST_F(GraphModuleTest, TwoArtifactsOpenAtOnceRunTheirOwnKernels) {
  const std::string a_path = compile_small();
  Graph other;
  const ValueId x = other.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  other.add_output(add(other, "Tanh", {add(other, "Neg", {x})}));
  const std::string b_path = dir.file("other.kiln");
  driver::compile_graph(other, b_path);
  std::vector<deploy::GraphModule> open;
  for (int i = 0; i < 3; ++i) {  // a, b, then a again, all alive together
    open.push_back(deploy::GraphModule::load(i == 1 ? b_path : a_path));
  }
  driver::GraphExecutor ref_a(small_graph()), ref_b(other);
  const deploy::Tensor in = random_tensor({2, 3, 4}, 7);
  for (size_t i = 0; i < open.size(); ++i) {
    SCOPED_TRACE(i);
    deploy::GraphModule &m = open[i];
    ASSERT_EQ(m.outputs().size(), i == 1 ? 1u : 2u);
    m.set_input("x", in);
    m.run();
    const auto want = (i == 1 ? ref_b : ref_a).run(std::vector<deploy::Tensor>{in});
    EXPECT_LE(relative_error(m.get_output(0), want[0]), 1e-6);
  }
}

TEST_F(GraphModuleTest, TheFileCarriesReadableGraphAndPlan) {
  const Json g = artifact_graph(compile_small());
  EXPECT_EQ(g.at("format").as_string(), "kiln-graph");
  bool saw_view = false;
  for (const Json &s : g.at("steps").as_array())
    saw_view = saw_view || (s.contains("view") && s.at("op").as_string() == "Flatten");
  EXPECT_TRUE(saw_view);
  for (const Json &v : g.at("values").as_array()) {
    if (v.contains("offset")) {
      EXPECT_EQ(v.at("offset").as_int() % 64, 0) << v.at("name").as_string();
    }
  }
  EXPECT_LE(g.at("memory_plan").at("arena_bytes").as_int(), g.at("memory_plan").at("unplanned_bytes").as_int());
}

TEST_F(GraphModuleTest, AFlippedByteIsACorruptFile) {
  const std::string path = compile_small();
  std::string bytes = read_bytes(path);
  bytes[bytes.size() / 2] ^= 0x5a;
  write_bytes(path, bytes);
  try {
    deploy::GraphModule::load(path);
    FAIL() << "a corrupt file loaded";
  } catch (const deploy::ArtifactError &e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is corrupt: its checksum does not match"), std::string::npos) << e.what();
  }
}

TEST_F(GraphModuleTest, ATruncatedFileSaysSo) {
  const std::string path = compile_small();
  const std::string bytes = read_bytes(path);
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{100}}) {
    write_bytes(path, bytes.substr(0, keep));
    try {
      deploy::GraphModule::load(path);
      FAIL() << "a truncated file loaded";
    } catch (const deploy::ArtifactError &e) {
      EXPECT_NE(std::string(e.what()).find("is truncated"), std::string::npos) << keep << ": " << e.what();
    }
  }
}

TEST_F(GraphModuleTest, AForeignFileIsNotAnArtifact) {
  const std::string path = dir.file("model.onnx");
  const std::string onnx_start = std::string("\x08\x07\x12\x07", 4) + "pytorch, and more of a protobuf";
  write_bytes(path, onnx_start);
  EXPECT_FALSE(deploy::is_artifact(path));
  try {
    deploy::GraphModule::load(path);
    FAIL() << "a foreign file loaded";
  } catch (const deploy::ModuleError &e) {  // ArtifactError is a ModuleError
    EXPECT_NE(std::string(e.what()).find("is not a Kiln model artifact"), std::string::npos) << e.what();
  }
  EXPECT_THROW(deploy::GraphModule::load(dir.file("missing.kiln")), deploy::ArtifactError);
}

TEST_F(GraphModuleTest, AnotherFormatVersionIsRefusedByNumber) {
  const std::string path = compile_small();
  EXPECT_TRUE(deploy::is_artifact(path));
  std::string bytes = read_bytes(path);
  const uint32_t version = deploy::kArtifactVersion + 1;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  write_bytes(path, bytes);
  try {
    deploy::GraphModule::load(path);
    FAIL() << "a file of another version loaded";
  } catch (const deploy::ArtifactError &e) {
    EXPECT_NE(std::string(e.what()).find("format version " + std::to_string(version)), std::string::npos) << e.what();
  }
}

TEST_F(GraphModuleTest, AVersionOneFileStillLoadsAndVersionZeroIsRefused) {
  const std::string path = compile_small();
  const std::string bytes = read_bytes(path);
  auto with_version = [&](uint32_t version) {
    std::string b = bytes;
    std::memcpy(b.data() + 8, &version, sizeof version);
    std::memset(b.data() + deploy::kArtifactChecksumOffset, '0', 64);
    const std::string sum = contracts::sha256_hex(b);
    std::memcpy(b.data() + deploy::kArtifactChecksumOffset, sum.data(), 64);
    write_bytes(path, b);
  };
  with_version(1);  // version 1 files have no views with offsets: the same graph reads the same
  deploy::GraphModule m = deploy::GraphModule::load(path);
  const deploy::Tensor x = random_tensor({2, 3, 4}, 4);
  m.set_input("x", x);
  m.run();
  driver::GraphExecutor ref(small_graph());
  EXPECT_LE(relative_error(m.get_output(0), ref.run(std::vector<deploy::Tensor>{x})[0]), 1e-6);
  with_version(0);
  try {
    deploy::GraphModule::load(path);
    FAIL() << "a file of version 0 loaded";
  } catch (const deploy::ArtifactError &e) {
    EXPECT_NE(std::string(e.what()).find("format version 0; this runtime reads versions 1 to"), std::string::npos)
        << e.what();
  }
}

TEST_F(GraphModuleTest, AWrongInputNamesTheInput) {
  deploy::GraphModule m = deploy::GraphModule::load(compile_small());
  try {
    m.set_input("x", random_tensor({2, 3, 5}, 1));
    FAIL() << "a wrong shape was accepted";
  } catch (const deploy::GraphInputError &e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' is float32[2, 3, 5], the model expects float32[2, 3, 4]"),
              std::string::npos)
        << e.what();
  }
  deploy::Tensor ints = deploy::Tensor::empty({2, 3, 4}, deploy::DType::of<int32_t>());
  try {
    m.set_input(0, ints);
    FAIL() << "a wrong dtype was accepted";
  } catch (const deploy::GraphInputError &e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' is int32[2, 3, 4]"), std::string::npos) << e.what();
  }
  try {
    m.set_input("y", random_tensor({2, 3, 4}, 1));
    FAIL() << "an unknown input was accepted";
  } catch (const deploy::GraphInputError &e) {
    EXPECT_NE(std::string(e.what()).find("no input named 'y' (its inputs: x)"), std::string::npos) << e.what();
  }
}

TEST_F(GraphModuleTest, AnOpEvaluatedOnlyAtCompileTimeIsAClearError) {
  Graph g;
  const ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3}});
  const ValueId s = add(g, "Shape", {x});
  g.add_output(s);
  try {
    driver::compile_graph(g, dir.file("shape.kiln"));
    FAIL() << "a Shape node compiled";
  } catch (const graph::GraphError &e) {
    EXPECT_NE(std::string(e.what()).find("cannot be compiled into an artifact"), std::string::npos) << e.what();
  }
}

TEST_F(GraphModuleTest, ACProgramRunsTheArtifactThroughTheCApi) {
  const std::string path = compile_small();
  const deploy::Tensor x = random_tensor({2, 3, 4}, 9);
  write_bytes(dir.file("in.raw"), std::string(static_cast<const char *>(x.data()), x.nbytes()));
  const std::string program = KILN_GRAPH_C_PROGRAM, in = dir.file("in.raw"), out = dir.file("out.raw");
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(program.c_str(), program.c_str(), path.c_str(), in.c_str(), out.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::string got_bytes = read_bytes(out);
  driver::GraphExecutor ref(small_graph());
  const deploy::Tensor want = ref.run(std::vector<deploy::Tensor>{x})[0];
  ASSERT_EQ(got_bytes.size(), want.nbytes());
  deploy::Tensor got = deploy::Tensor::empty(want.shape(), want.dtype());
  got.copy_from(got_bytes.data(), got_bytes.size());
  EXPECT_LE(relative_error(got, want), 1e-6);
}

// Concats compiled in place: the producers of the inputs write into the output's bytes.
ValueId conv(Graph &g, ValueId x, int64_t out_channels, int64_t kernel, uint64_t seed) {
  const int64_t in_channels = g.value(x).type.shape[1];
  const ValueId w =
      g.add_constant(g.unique_name("w"), random_tensor({out_channels, in_channels, kernel, kernel}, seed));
  Node n;
  n.op = "Conv";
  n.name = g.unique_name("Conv");
  n.inputs = {x, w};
  n.outputs = {kNoValue};
  const int64_t p = kernel / 2;
  n.attrs["pads"] = graph::Attribute::of_ints({p, p, p, p});
  auto types = graph::infer_types(g, n);
  return g.add_node(n, {g.unique_name("conv_out")}, types)[0];
}

ValueId concat_of(Graph &g, std::vector<ValueId> inputs, int64_t axis) {
  Node n;
  n.op = "Concat";
  n.name = g.unique_name("Concat");
  n.inputs = std::move(inputs);
  n.outputs = {kNoValue};
  n.attrs["axis"] = graph::Attribute::of_int(axis);
  auto types = graph::infer_types(g, n);
  return g.add_node(n, {g.unique_name("concat_out")}, types)[0];
}

struct ConcatCase {
  Graph g;
  std::vector<int64_t> input_shape;
};

// x[n,3,8,8] -> Conv 3x3 -> Relu = a, x -> Conv 1x1 = b; Concat(a, b) on the channels -> Conv 1x1.
ConcatCase fire_module(int64_t batch) {
  ConcatCase c;
  c.input_shape = {batch, 3, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  const ValueId a = add(c.g, "Relu", {conv(c.g, x, 16, 3, 11)});
  const ValueId b = conv(c.g, x, 16, 1, 12);
  c.g.add_output(conv(c.g, concat_of(c.g, {a, b}, 1), 8, 1, 13));
  return c;
}

class ConcatInPlaceTest : public ::testing::Test {
 protected:
  // Compiles `c` and checks it against the reference executor and its stored plan; the Concat
  // steps that remain kernels.
  int compile_and_check(const ConcatCase &c, bool in_place = true) {
    const std::string path = dir.file("concat.kiln");
    driver::GraphCompileOptions o;
    o.concat_in_place = in_place;
    report = driver::compile_graph(c.g, path, o);
    const Json j = artifact_graph(path);
    const std::vector<std::string> conflicts = plan_conflicts(j);
    EXPECT_TRUE(conflicts.empty()) << conflicts.size() << " pairs overlap, e.g. " << conflicts.front();
    int concat_kernels = 0;
    for (const Json &s : j.at("steps").as_array())
      concat_kernels += s.at("op").as_string() == "Concat" && s.contains("kernel");
    deploy::GraphModule m = deploy::GraphModule::load(path);
    driver::GraphExecutor ref(c.g);
    for (uint64_t seed : {5, 6}) {
      const deploy::Tensor x = random_tensor(c.input_shape, seed);
      m.set_input(0, x);
      m.run();
      const auto want = ref.run(std::vector<deploy::Tensor>{x});
      EXPECT_EQ(want.size(), m.outputs().size());
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_LE(relative_error(m.get_output(static_cast<int>(k)), want[k]), 1e-4) << "output " << k;
    }
    return concat_kernels;
  }
  test::TempDir dir;
  driver::GraphCompileReport report;
};

TEST_F(ConcatInPlaceTest, AChannelConcatOfTwoConvOutputsHasNoKernelAndMatches) {
  EXPECT_EQ(compile_and_check(fire_module(1)), 0);
  EXPECT_EQ(report.concats_in_place, 1);
  const int64_t in_place_arena = report.arena_bytes;
  EXPECT_EQ(compile_and_check(fire_module(1), /*in_place=*/false), 1);
  EXPECT_EQ(report.concats_in_place, 0);
  // The inputs no longer need buffers of their own next to the output's.
  EXPECT_LT(in_place_arena, report.arena_bytes);
}

TEST_F(ConcatInPlaceTest, TheSlicesAreViewsAtTheirOffsetsInTheOutput) {
  compile_and_check(fire_module(1));
  const Json j = artifact_graph(dir.file("concat.kiln"));
  const auto &values = j.at("values").as_array();
  int slices = 0;
  for (const Json &v : values) {
    if (!v.contains("view_of")) continue;
    const Json &whole = values[static_cast<size_t>(v.at("view_of").as_int())];
    const int64_t at = v.contains("view_offset") ? v.at("view_offset").as_int() : 0;
    EXPECT_EQ(v.at("offset").as_int(), whole.at("offset").as_int() + at) << v.at("name").as_string();
    EXPECT_TRUE(at == 0 || at == 16 * 8 * 8 * 4) << at;
    ++slices;
  }
  EXPECT_EQ(slices, 2);
}

TEST_F(ConcatInPlaceTest, AGraphInputIsCopied) {
  ConcatCase c;
  c.input_shape = {1, 16, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  c.g.add_output(add(c.g, "Relu", {concat_of(c.g, {conv(c.g, x, 16, 1, 1), x}, 1)}));
  EXPECT_EQ(compile_and_check(c), 1);
  EXPECT_EQ(report.concats_in_place, 0);
}

TEST_F(ConcatInPlaceTest, AGraphOutputIsCopied) {
  ConcatCase c;
  c.input_shape = {1, 3, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  const ValueId a = conv(c.g, x, 16, 1, 1);
  c.g.add_output(add(c.g, "Relu", {concat_of(c.g, {a, conv(c.g, x, 16, 3, 2)}, 1)}));
  c.g.add_output(a);
  EXPECT_EQ(compile_and_check(c), 1);
}

TEST_F(ConcatInPlaceTest, AConstantIsCopied) {
  ConcatCase c;
  c.input_shape = {1, 3, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  const ValueId k = c.g.add_constant("k", random_tensor({1, 16, 8, 8}, 3));
  c.g.add_output(add(c.g, "Relu", {concat_of(c.g, {conv(c.g, x, 16, 1, 1), k}, 1)}));
  EXPECT_EQ(compile_and_check(c), 1);
}

TEST_F(ConcatInPlaceTest, AnInputTwiceIsCopied) {
  ConcatCase c;
  c.input_shape = {1, 3, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  const ValueId a = conv(c.g, x, 16, 1, 1);
  c.g.add_output(add(c.g, "Relu", {concat_of(c.g, {a, a}, 1)}));
  EXPECT_EQ(compile_and_check(c), 1);
}

TEST_F(ConcatInPlaceTest, AChannelConcatAtBatchTwoIsCopied) {
  EXPECT_EQ(compile_and_check(fire_module(2)), 1);
  EXPECT_EQ(report.concats_in_place, 0);
}

TEST_F(ConcatInPlaceTest, AConcatOfAConcatInPlaceCopiesTheInnerOne) {
  // The inner Concat's output is no kernel's output: the outer one copies it, while the inner one
  // still goes in place; the inner slices are read again by a later Add.
  ConcatCase c;
  c.input_shape = {1, 3, 8, 8};
  const ValueId x = c.g.add_input("x", TensorType{ir::Float(32), c.input_shape});
  const ValueId a = conv(c.g, x, 16, 1, 1), b = conv(c.g, x, 16, 3, 2);
  const ValueId inner = concat_of(c.g, {a, b}, 1);
  const ValueId outer = concat_of(c.g, {inner, conv(c.g, x, 32, 1, 3)}, 1);
  c.g.add_output(add(c.g, "Relu", {outer}));
  c.g.add_output(add(c.g, "Add", {a, b}));
  EXPECT_EQ(compile_and_check(c), 1);
  EXPECT_EQ(report.concats_in_place, 1);
}

// The test models of tests/frontend (exported by make_models.py; skipped without torch).
constexpr const char *kPython = "/usr/bin/python3";
constexpr int kNoTorch = 77;

int make_model(const std::string &model) {
  const std::string script = KILN_MAKE_MODELS_SCRIPT, out_dir = KILN_MODELS_DIR;
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(kPython, kPython, script.c_str(), out_dir.c_str(), model.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Each test model exported (skipped without torch) and imported, with its input.
class ArtifactModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model = GetParam();
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: cannot export " << model;
    const int status = make_model(model);
    if (status == kNoTorch) GTEST_SKIP() << "torch is missing: " << model << " not tested";
    ASSERT_EQ(status, 0) << "make_models.py " << model << " failed";
    mdir = fs::path(KILN_MODELS_DIR) / model;
    input = frontend::onnx::read_tensor_file((mdir / "input_0.pb").string());
    g = frontend::onnx::import_model((mdir / "model.onnx").string());
  }
  std::string model;
  fs::path mdir;
  deploy::Tensor input;
  Graph g;
};

TEST_P(ArtifactModelTest, MatchesTheReferenceExecutorAndItsPlanNeverOverlaps) {
  test::TempDir dir;
  const std::string path = dir.file(model + ".kiln");
  const driver::GraphCompileReport r =
      driver::compile_graph(driver::optimize_graph(g, driver::GraphPipelineOptions{}), path);
  EXPECT_LT(r.arena_bytes, r.unplanned_bytes) << model;
  std::printf(
      "artifact %s kernels=%d steps=%d arena_bytes=%lld unplanned_bytes=%lld in_place=%d concats_in_place=%d "
      "file_bytes=%lld\n",
      model.c_str(), r.kernels, r.steps, static_cast<long long>(r.arena_bytes),
      static_cast<long long>(r.unplanned_bytes), r.in_place, r.concats_in_place, static_cast<long long>(r.file_bytes));
  if (model == "squeezenet1_1") {
    EXPECT_GT(r.concats_in_place, 0);  // its Fire modules' Concats
  }

  const std::vector<std::string> conflicts = plan_conflicts(artifact_graph(path));
  EXPECT_TRUE(conflicts.empty()) << model << ": " << conflicts.size() << " pairs overlap, e.g. " << conflicts.front();

  deploy::GraphModule m = deploy::GraphModule::load(path);
  ASSERT_EQ(m.inputs().size(), 1u);
  m.set_input(0, input);
  m.run();
  driver::GraphExecutor ref(g);
  const std::vector<deploy::Tensor> want = ref.run(std::vector<deploy::Tensor>{input});
  ASSERT_EQ(want.size(), m.outputs().size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_LE(relative_error(m.get_output(static_cast<int>(k)), want[k]), 1e-4) << model << " output " << k;
}

// A tuning log of random records: for each workload asked, up to four configs sampled from its
// space with random times, the same ones at every call (seeded by the workload's key), so the layout
// pass chooses each convolution's blocks among random block choices and every kernel is built with
// a random config of its own.
class RandomLog : public ops::ConfigLookup {
 public:
  std::optional<ops::TunedConfig> best(const contracts::Workload &w, const std::string &target) const override {
    std::vector<ops::TunedConfig> t = top(w, target, 1);
    if (t.empty()) return std::nullopt;
    return t[0];
  }
  std::vector<ops::TunedConfig> top(const contracts::Workload &w, const std::string &target, int64_t k) const override {
    asked.insert(w.template_name);
    std::vector<ops::TunedConfig> out;
    const ops::Task t(w.template_name, w.args, driver::resolve_target(target));
    std::mt19937_64 rng(std::stoull(w.key.substr(0, 15), nullptr, 16));
    std::uniform_real_distribution<double> time(1e-5, 2e-5);
    for (int64_t i = 0; i < std::min<int64_t>(k, 4); ++i) {
      ops::TunedConfig c;
      c.config = t.space().sample(rng).record();
      c.target = target;
      c.mean_s = time(rng);
      out.push_back(c);
    }
    std::sort(out.begin(), out.end(),
              [](const ops::TunedConfig &a, const ops::TunedConfig &b) { return a.mean_s < b.mean_s; });
    return out;
  }
  mutable std::set<std::string> asked;  // the templates asked for
};

// The replay of a tuning log, end to end: each model laid out and built with random records (random
// blocks for each convolution, so transforms wherever two disagree, and a random schedule for every
// template kernel) compiles to an artifact that computes what torch does and what the unoptimized
// executor does.
TEST_P(ArtifactModelTest, ReplayingARandomLogKeepsTorchsOutputs) {
  const deploy::Tensor torch_out = frontend::onnx::read_tensor_file((mdir / "output_0.pb").string());
  RandomLog log;
  driver::GraphPipelineOptions po;
  po.configs = &log;
  driver::GraphCompileOptions co;
  co.kernels.configs = &log;
  test::TempDir dir;
  const std::string path = dir.file(model + "_random.kiln");
  const driver::GraphCompileReport r = driver::compile_graph(driver::optimize_graph(g, po), path, co);
  std::printf("replay %s kernels=%d template_kernels=%d tuned_kernels=%d\n", model.c_str(), r.kernels,
              r.template_kernels, r.tuned_kernels);
  // Every kernel tuned as a task took a record, and there are some (convolutions, or dense layers).
  EXPECT_GT(r.template_kernels, 0) << model;
  EXPECT_EQ(r.tuned_kernels, r.template_kernels) << model;

  deploy::GraphModule m = deploy::GraphModule::load(path);
  ASSERT_EQ(m.inputs().size(), 1u);
  m.set_input(0, input);
  m.run();
  ASSERT_EQ(m.outputs().size(), 1u);
  const deploy::Tensor got = m.get_output(0);
  driver::GraphExecutor ref(g);
  EXPECT_LE(relative_error(got, ref.run(std::vector<deploy::Tensor>{input})[0]), 1e-4) << model;
  // torch's reference is float64 written as float32 or float64.
  ASSERT_EQ(got.numel(), torch_out.numel());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < torch_out.numel(); ++i) {
    const double w = torch_out.dtype().bytes() == 8 ? torch_out.data_as<double>()[i] : torch_out.data_as<float>()[i];
    worst = std::max(worst, std::fabs(w - got.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(w));
  }
  EXPECT_LE(worst, 1e-4 * scale) << model << ": the replayed artifact differs from torch";
}

INSTANTIATE_TEST_SUITE_P(Models, ArtifactModelTest,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0",
                                           "bert_encoder"));

// Per-step profiling (GraphModule::run_profiled, deploy::profile_runs, the C API's
// kiln_graph_run_profiled): the outputs are a plain run's, there is one time per kernel step named
// as the artifact's graph names it, and the steps' times fit inside the run's.
class ProfileTest : public GraphModuleTest {
 protected:
  // The artifact's kernel steps (views have none), in order.
  std::vector<const Json *> kernel_steps(const Json &g) {
    std::vector<const Json *> out;
    for (const Json &s : g.at("steps").as_array())
      if (s.contains("kernel")) out.push_back(&s);
    return out;
  }
};

TEST_F(ProfileTest, TheStepsAreTheArtifactsKernelCallsWithTheirNodesAndOps) {
  const std::string path = compile_small();
  const Json g = artifact_graph(path);
  const deploy::GraphModule m = deploy::GraphModule::load(path);
  const std::vector<const Json *> want = kernel_steps(g);
  ASSERT_EQ(m.steps().size(), want.size());
  ASSERT_EQ(m.steps().size(), 4u);  // Exp, Relu, Add, Sigmoid; Flatten is a view
  const std::vector<std::string> ops{"Exp", "Relu", "Add", "Sigmoid"};
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(m.steps()[k].kernel, want[k]->at("kernel").as_string());
    EXPECT_EQ(m.steps()[k].node, want[k]->at("node").as_string());
    EXPECT_EQ(m.steps()[k].op, ops[k]);
    EXPECT_EQ(m.steps()[k].node.rfind(ops[k], 0), 0u) << m.steps()[k].node;  // add() names nodes by op
  }
}

TEST_F(ProfileTest, AProfiledRunComputesWhatARunDoesAndItsStepsFitInsideIt) {
  const std::string path = compile_small();
  deploy::GraphModule m = deploy::GraphModule::load(path);
  driver::GraphExecutor ref(small_graph());
  for (uint64_t seed : {4, 5}) {
    SCOPED_TRACE(seed);
    const deploy::Tensor x = random_tensor({2, 3, 4}, seed);
    m.set_input("x", x);
    m.run();
    const deploy::Tensor plain0 = m.get_output(0), plain1 = m.get_output(1);
    m.set_input("x", random_tensor({2, 3, 4}, seed + 100));  // other values in the arena first
    m.run();
    m.set_input("x", x);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<double> seconds = m.run_profiled();
    const double outside = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto want = ref.run(std::vector<deploy::Tensor>{x});
    EXPECT_LE(relative_error(m.get_output(0), want[0]), 1e-6);
    EXPECT_EQ(std::memcmp(m.get_output(0).data(), plain0.data(), plain0.nbytes()), 0);
    EXPECT_EQ(std::memcmp(m.get_output(1).data(), plain1.data(), plain1.nbytes()), 0);
    ASSERT_EQ(seconds.size(), m.steps().size());
    double sum = 0;
    for (double s : seconds) {
      EXPECT_GE(s, 0);
      sum += s;
    }
    EXPECT_GT(sum, 0);
    EXPECT_LE(sum, outside);  // the steps are consecutive intervals inside the call
  }
}

TEST_F(ProfileTest, ProfileRunsGivesAMedianPerStepAndRefusesZeroRuns) {
  deploy::GraphModule m = deploy::GraphModule::load(compile_small());
  m.set_input("x", random_tensor({2, 3, 4}, 6));
  const deploy::RunProfile p = deploy::profile_runs(m, 3);
  EXPECT_EQ(p.runs, 3);
  EXPECT_EQ(p.warmup, 3);
  ASSERT_EQ(p.step_ms.size(), m.steps().size());
  ASSERT_EQ(p.typical_ms.size(), m.steps().size());
  double typical = 0;
  for (double ms : p.typical_ms) typical += ms;
  EXPECT_DOUBLE_EQ(typical, p.steps_ms);  // the median profiled run is one of the runs
  EXPECT_GT(p.steps_ms, 0);
  EXPECT_GT(p.run_ms, 0);
  for (int bad : {0, -1}) {
    try {
      deploy::profile_runs(m, bad);
      ADD_FAILURE() << bad << " runs were accepted";
    } catch (const deploy::GraphInputError &e) {
      EXPECT_NE(std::string(e.what()).find("at least 1 run, got " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(ProfileTest, TheCApiNamesAndTimesTheSteps) {
  const std::string path = compile_small();
  KilnGraph *g = kiln_graph_load(path.c_str());
  ASSERT_NE(g, nullptr) << kiln_graph_last_error();
  const deploy::GraphModule m = deploy::GraphModule::load(path);
  ASSERT_EQ(kiln_graph_num_steps(g), static_cast<int32_t>(m.steps().size()));
  for (int32_t k = 0; k < kiln_graph_num_steps(g); ++k) {
    EXPECT_EQ(std::string(kiln_graph_step_kernel(g, k)), m.steps()[static_cast<size_t>(k)].kernel);
    EXPECT_EQ(std::string(kiln_graph_step_node(g, k)), m.steps()[static_cast<size_t>(k)].node);
    EXPECT_EQ(std::string(kiln_graph_step_op(g, k)), m.steps()[static_cast<size_t>(k)].op);
  }
  EXPECT_EQ(kiln_graph_step_node(g, kiln_graph_num_steps(g)), nullptr);
  EXPECT_EQ(kiln_graph_step_op(g, -1), nullptr);
  const deploy::Tensor x = random_tensor({2, 3, 4}, 8);
  const int64_t shape[] = {2, 3, 4};
  ASSERT_EQ(kiln_graph_set_input(g, 0, x.data(), shape, 3, static_cast<uint8_t>(deploy::DType::Float), 32), 0);
  std::vector<double> seconds(static_cast<size_t>(kiln_graph_num_steps(g)) + 1, -1.0);
  ASSERT_EQ(kiln_graph_run_profiled(g, seconds.data()), 0) << kiln_graph_last_error();
  double sum = 0;
  for (size_t k = 0; k + 1 < seconds.size(); ++k) sum += seconds[k];
  EXPECT_GT(sum, 0);
  EXPECT_EQ(seconds.back(), -1.0);  // nothing written past the steps
  driver::GraphExecutor ref(small_graph());
  const deploy::Tensor want = ref.run(std::vector<deploy::Tensor>{x})[0];
  deploy::Tensor got = deploy::Tensor::empty(want.shape(), want.dtype());
  got.copy_from(kiln_graph_output_data(g, 0), want.nbytes());
  EXPECT_LE(relative_error(got, want), 1e-6);
  EXPECT_NE(kiln_graph_run_profiled(g, nullptr), 0);
  EXPECT_NE(std::string(kiln_graph_last_error()).find("no array"), std::string::npos);
  kiln_graph_free(g);
}

}  // namespace
}  // namespace kiln
