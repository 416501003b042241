// The C back end: golden text, names, literals, and the CModule harness.
#include "compiler/codegen/c/codegen_c.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "compiler/codegen/c/c_module.h"
#include "tests/compiler/interp/both_backends.h"

namespace kiln {
namespace {

using deploy::Tensor;
using ir::Buffer;
using ir::Expr;
using ir::Float;
using ir::Int;
using ir::Stmt;
using ir::Var;
using test::filled;
using test::load;
using test::loop;
using test::make_func;
using test::make_tensor;
using test::store;
using test::values;

ir::LoweredFunc vector_add() {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer C = ir::make_buffer("C", Float(32), {n});
  Var i("i");
  return make_func("vadd", {A, B, C}, {n}, loop(i, n, store(C, load(A, i) + load(B, i), i)));
}

// The kernel, and the exported entry point with the module table of deploy/c_abi.h. (The entry's
// argument checks are those of lower::make_packed_api, tested on their own.)
TEST(CodegenCTest, GoldenVectorAdd) {
  const std::string kernel = R"golden(
static const char *kiln_error = "";

static int32_t kiln_kernel(float* restrict A, float* restrict B, float* restrict C, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    C[i] = A[i] + B[i];
  }
  return 0;
}

static int32_t kiln_entry(const KilnArg* args, int32_t num_args) {
  if (!(num_args == 3)) {
    kiln_error = "vadd: expected 3 arguments (A, B, C)";
    return kKilnErrorArgument;
  }
  if (args == NULL) {
    kiln_error = "vadd: the argument list is null";
    return kKilnErrorArgument;
  }
)golden";
  const std::string tail = R"golden(
  float* A = args[0].data;
  float* B = args[1].data;
  float* C = args[2].data;
  return kiln_kernel(A, B, C, n);
}

int32_t kiln_fn_vadd(const KilnArg* args, int32_t num_args) { return kiln_entry(args, num_args); }

static const char *kiln_last_error(void) { return kiln_error; }

static const int64_t kiln_shape_0[] = {-1};
static const int64_t kiln_shape_1[] = {-1};
static const int64_t kiln_shape_2[] = {-1};
static const KilnParamInfo kiln_params[] = {
  {"A", 1, 2, 32, 1, kiln_shape_0},
  {"B", 1, 2, 32, 1, kiln_shape_1},
  {"C", 1, 2, 32, 1, kiln_shape_2},
};
static const KilnFunctionInfo kiln_function = {"vadd", "vadd(A: float32[n], B: float32[n], C: float32[n])", kiln_entry, 3, kiln_params};
static const KilnFunctionInfo *const kiln_functions[] = {&kiln_function};
static const KilnRuntimeApi *kiln_runtime_api = NULL;
const KilnModuleInfo kiln_module_info = {1, 1, kiln_functions, kiln_last_error, &kiln_runtime_api, "c"};
)golden";
  const std::string src = codegen::codegen_c(vector_add());
  EXPECT_EQ(src.rfind("// Kiln C back end: function vadd.\n#include <math.h>\n", 0), 0u) << src;
  EXPECT_NE(src.find(kernel), std::string::npos) << src;
  ASSERT_GE(src.size(), tail.size());
  EXPECT_EQ(src.substr(src.size() - tail.size()), tail) << src;
}

TEST(CodegenCTest, OutputIsDeterministic) {
  const ir::LoweredFunc f = vector_add();
  EXPECT_EQ(codegen::codegen_c(f), codegen::codegen_c(f));
}

TEST(CodegenCTest, NamesAreSanitisedAndDistinctVariablesStayDistinct) {
  // Two different variables called "i", one called "int", a buffer called "my-out", a size
  // variable called "n.0": all must become distinct, valid C identifiers.
  Var n("n.0");
  Buffer A = ir::make_buffer("A", Int(32), {n});
  Buffer O = ir::make_buffer("my-out", Int(32), {n, n});
  Var i1("i"), i2("i"), kw("int");
  Stmt body =
      loop(i1, n,
           loop(i2, n, ir::LetStmtNode::make(kw, load(A, i1) * 10 + load(A, i2), store(O, kw, O.offset_of({i1, i2})))));
  auto f = make_func("my kernel", {A, O}, {n}, body);
  const std::string src = codegen::codegen_c(f);
  EXPECT_NE(src.find("static int32_t kiln_kernel(int32_t* restrict A, int32_t* restrict my_out, int32_t n_0)"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("\nint32_t kiln_fn_my_kernel(const KilnArg* args, int32_t num_args)"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int32_t i_1 = 0; i_1 < n_0; ++i_1)"), std::string::npos) << src;
  EXPECT_NE(src.find("int32_t int_1 = "), std::string::npos) << src;
  auto r = test::run_both(f, {make_tensor<int32_t>({3}, {1, 2, 3}), filled<int32_t>({3, 3}, 0)});
  test::for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    EXPECT_EQ(values<int32_t>(out[1]), (std::vector<int32_t>{11, 12, 13, 21, 22, 23, 31, 32, 33}));
  });
}

TEST(CodegenCTest, LiteralsOfEveryTypeSurviveTheRoundTrip) {
  Buffer F = ir::make_buffer("F", Float(32), {6});
  Buffer D = ir::make_buffer("D", Float(64), {2});
  Buffer I64 = ir::make_buffer("I64", Int(64), {2});
  Buffer U64 = ir::make_buffer("U64", ir::UInt(64), {1});
  Buffer I32 = ir::make_buffer("I32", Int(32), {1});
  Buffer I8 = ir::make_buffer("I8", Int(8), {1});
  Buffer Bo = ir::make_buffer("Bo", ir::Bool(), {2});
  const float inf = std::numeric_limits<float>::infinity();
  Stmt body = ir::BlockNode::make({
      store(F, ir::make_const(Float(32), static_cast<double>(inf)), 0),
      store(F, ir::make_const(Float(32), static_cast<double>(-inf)), 1),
      store(F, ir::make_const(Float(32), -0.0), 2),
      store(F, ir::make_const(Float(32), 1e-45), 3),
      store(F, ir::make_const(Float(32), std::nan("")), 4),
      store(F, ir::make_const(Float(32), 0.1), 5),
      store(D, ir::make_const(Float(64), 0.1), 0),
      store(D, ir::make_const(Float(64), -1e300), 1),
      store(I64, ir::make_const(Int(64), std::numeric_limits<int64_t>::min()), 0),
      store(I64, ir::make_const(Int(64), int64_t{-5}), 1),
      store(U64, ir::make_const(ir::UInt(64), int64_t{-1}), 0),
      store(I32, ir::make_const(Int(32), int64_t{std::numeric_limits<int32_t>::min()}), 0),
      store(I8, ir::make_const(Int(8), int64_t{-128}), 0),
      store(Bo, ir::const_true(), 0),
      store(Bo, ir::const_false(), 1),
  });
  auto f = make_func("literals", {F, D, I64, U64, I32, I8, Bo}, {}, body);
  Tensor bools = Tensor::empty({2}, deploy::DType::of<bool>());
  const uint8_t init[2] = {0, 1};
  bools.copy_from(init, 2);
  auto r = test::run_both(f, {filled<float>({6}, 7.0f), filled<double>({2}, 7.0), filled<int64_t>({2}, 7),
                              filled<uint64_t>({1}, 7), filled<int32_t>({1}, 7), filled<int8_t>({1}, 7), bools});
  test::for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto fv = values<float>(out[0]);
    EXPECT_EQ(fv[0], inf);
    EXPECT_EQ(fv[1], -inf);
    EXPECT_TRUE(fv[2] == 0.0f && std::signbit(fv[2]));
    EXPECT_EQ(fv[3], 1e-45f);
    EXPECT_TRUE(std::isnan(fv[4]));
    EXPECT_EQ(fv[5], 0.1f);
    EXPECT_EQ(values<double>(out[1]), (std::vector<double>{0.1, -1e300}));
    EXPECT_EQ(values<int64_t>(out[2]), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -5}));
    EXPECT_EQ(values<uint64_t>(out[3])[0], std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(values<int32_t>(out[4])[0], std::numeric_limits<int32_t>::min());
    EXPECT_EQ(values<int8_t>(out[5])[0], -128);
    EXPECT_EQ(values<uint8_t>(out[6]), (std::vector<uint8_t>{1, 0}));
  });
}

TEST(CodegenCTest, CompilerErrorsAreUserErrorsCarryingTheCompilerOutput) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_fake_cc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fake = (dir / "fake-cc").string();
  {
    std::ofstream out(fake);
    out << "#!/bin/sh\necho 'src.c:1:1: error: fake compiler says no' >&2\nexit 1\n";
  }
  ::chmod(fake.c_str(), 0755);
  try {
    codegen::CModule m(vector_add(), fake);
    ADD_FAILURE() << "expected a UserError";
  } catch (const InternalError &e) {
    ADD_FAILURE() << "internal error: " << e.what();
  } catch (const UserError &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("fake compiler says no"), std::string::npos) << what;
    EXPECT_NE(what.find("vadd"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
}

TEST(CodegenCTest, ModuleKeepsItsSourceAndRunsRepeatedly) {
  const ir::LoweredFunc f = vector_add();
  codegen::CModule m(f, KILN_C_COMPILER);
  EXPECT_EQ(m.source(), codegen::codegen_c(f));
  for (int len : {3, 40}) {
    Tensor a = filled<float>({len}, 1.5f), b = filled<float>({len}, 2.0f), c = filled<float>({len}, 0.0f);
    EXPECT_EQ(m.call({a, b, c}), 0);
    EXPECT_EQ(values<float>(c), std::vector<float>(len, 3.5f));
    EXPECT_EQ(m.last_error(), "");
  }
}

}  // namespace
}  // namespace kiln
