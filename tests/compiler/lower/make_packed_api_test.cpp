// make_packed_api: the argument checks of a compiled function's entry point, written as IR, and
// what every back end does with them: the LLVM back end and the C back end reject the same raw
// calls with the same status and message, and the interpreter raises the same message.
#include "compiler/lower/make_packed_api.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "compiler/codegen/c/c_module.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/ir_printer.h"
#include "tests/compiler/codegen/llvm_harness.h"
#include "tests/compiler/interp/both_backends.h"

namespace kiln {
namespace {

using deploy::Tensor;
using ir::Buffer;
using ir::Float;
using ir::Var;
using test::expect_error;
using test::filled;
using test::load;
using test::loop;
using test::make_func;
using test::row_add;
using test::store;
using test::values;

TEST(MakePackedApiTest, GoldenChecksBeforeTheKernel) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n, 2});
  Var i("i");
  auto f = make_func("copy", {A, B}, {n}, loop(i, n, store(B, load(A, i), i * 2)));
  const lower::PackedFunc p = lower::make_packed_api(f);
  const std::string expected = R"golden(assert((num_args == 2), "copy: expected 2 arguments (A, B)")
assert(!isnull(args), "copy: the argument list is null")
assert(!isnull(arg_field(args, 0, 0)), "copy: argument 1 (A): the data pointer is null")
assert(is_aligned(arg_field(args, 0, 0), 64), "copy: argument 1 (A): the data pointer is not 64-byte aligned")
assert((arg_field(args, 0, 1) == 1), "copy: argument 1 (A): expected 1 dimensions")
assert((((arg_field(args, 0, 4) == uint8(2)) && (arg_field(args, 0, 5) == uint8(32))) && (arg_field(args, 0, 6) == uint16(1))), "copy: argument 1 (A): expected dtype float32")
assert(!isnull(arg_field(args, 0, 2)), "copy: argument 1 (A): the shape pointer is null")
let A.shape0 = arg_field(args, 0, 2, 0)
assert((A.shape0 >= 0), "copy: argument 1 (A): dimension 0 is negative")
assert(!isnull(arg_field(args, 1, 0)), "copy: argument 2 (B): the data pointer is null")
assert(is_aligned(arg_field(args, 1, 0), 64), "copy: argument 2 (B): the data pointer is not 64-byte aligned")
assert((arg_field(args, 1, 1) == 2), "copy: argument 2 (B): expected 2 dimensions")
assert((((arg_field(args, 1, 4) == uint8(2)) && (arg_field(args, 1, 5) == uint8(32))) && (arg_field(args, 1, 6) == uint16(1))), "copy: argument 2 (B): expected dtype float32")
assert(!isnull(arg_field(args, 1, 2)), "copy: argument 2 (B): the shape pointer is null")
let B.shape0 = arg_field(args, 1, 2, 0)
assert((B.shape0 >= 0), "copy: argument 2 (B): dimension 0 is negative")
let B.shape1 = arg_field(args, 1, 2, 1)
assert((B.shape1 >= 0), "copy: argument 2 (B): dimension 1 is negative")
assert((A.shape0 <= 2147483647), "copy: size n (dimension 0 of argument 1 (A)) does not fit int32")
let n = int32(A.shape0)
if (!isnull(arg_field(args, 0, 3))) {
  assert(((A.shape0 <= 1) || (arg_field(args, 0, 3, 0) == 1)), "copy: argument 1 (A): stride of dimension 0 must be 1")
}
assert((B.shape0 == int64(n)), "copy: argument 2 (B): dimension 0 must be n (dimension 0 of argument 1 (A))")
assert((B.shape1 == 2), "copy: argument 2 (B): dimension 1 must be 2")
if (!isnull(arg_field(args, 1, 3))) {
  assert(((B.shape0 <= 1) || (arg_field(args, 1, 3, 0) == 2)), "copy: argument 2 (B): stride of dimension 0 must be 2")
  assert(((B.shape1 <= 1) || (arg_field(args, 1, 3, 1) == 1)), "copy: argument 2 (B): stride of dimension 1 must be 1")
}
let A = arg_field(args, 0, 0)
let B = arg_field(args, 1, 0)
// attr kernel_body = 0
for (i, 0, n) {
  B[(i * 2)] = A[i]
}
)golden";
  std::ostringstream os;
  os << p.func.body;
  EXPECT_EQ(os.str(), expected);
  EXPECT_EQ(p.signature, "copy(A: float32[n], B: float32[n, 2])");
  EXPECT_EQ(p.func.name, "copy");
  EXPECT_EQ(p.func.params.size(), 2u);
  EXPECT_TRUE(p.func.params[0].data.same_as(A.data));
}

TEST(MakePackedApiTest, ASizeNoArgumentGivesIsAnExprError) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n + 1});
  Var i("i");
  auto f = make_func("underived", {A}, {n}, loop(i, n, store(A, ir::Expr(0.0f), i)));
  expect_error<ExprError>([&] { lower::make_packed_api(f); },
                          {"function underived: size n is not a whole dimension of any argument"});
}

// The arguments of one raw call: tensors with their shapes held separately, so a case can break
// any field of a KilnArg.
struct RawCall {
  std::vector<Tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<KilnArg> args;
  int32_t num_args = 3;
  bool null_list = false;

  RawCall() : tensors{filled<float>({3, 4}, 1.0f), filled<float>({4}, 2.0f), filled<float>({3, 4}, 0.0f)} {
    args = deploy::to_kiln_args(tensors);
    for (auto &a : args) shapes.emplace_back(a.shape, a.shape + a.ndim);
    for (size_t i = 0; i < args.size(); ++i) args[i].shape = shapes[i].data();
  }
  int32_t call(KilnPackedFunc fn) const { return fn(null_list ? nullptr : args.data(), num_args); }
};

TEST(MakePackedApiTest, CompiledBackEndsRejectTheSameCallsWithTheSameMessages) {
  const ir::LoweredFunc f = row_add();
  codegen::LLVMModule llvm(f, test::native_options());
  codegen::CModule c(f, KILN_C_COMPILER);
  const KilnPackedFunc llvm_fn = llvm.function("row_add");
  const KilnPackedFunc c_fn = c.module().get_function("row_add");
  const int64_t transposed[] = {1, 3};
  const int64_t compact[] = {4, 1};
  struct Case {
    std::function<void(RawCall &)> spoil;
    std::string message;  // "" for a call that must succeed
  };
  const std::vector<Case> cases = {
      {[](RawCall &) {}, ""},
      {[](RawCall &r) { r.num_args = 2; }, "row_add: expected 3 arguments (A, B, C)"},
      {[](RawCall &r) { r.null_list = true; }, "row_add: the argument list is null"},
      {[](RawCall &r) { r.args[1].data = nullptr; }, "row_add: argument 2 (B): the data pointer is null"},
      {[](RawCall &r) { r.args[0].data = static_cast<char *>(r.args[0].data) + 4; },
       "row_add: argument 1 (A): the data pointer is not 64-byte aligned"},
      {[](RawCall &r) { r.args[2].ndim = 1; }, "row_add: argument 3 (C): expected 2 dimensions"},
      {[](RawCall &r) { r.args[1].dtype_code = kKilnInt; }, "row_add: argument 2 (B): expected dtype float32"},
      {[](RawCall &r) { r.args[1].dtype_lanes = 4; }, "row_add: argument 2 (B): expected dtype float32"},
      {[](RawCall &r) { r.args[0].shape = nullptr; }, "row_add: argument 1 (A): the shape pointer is null"},
      {[](RawCall &r) { r.shapes[0][0] = -1; }, "row_add: argument 1 (A): dimension 0 is negative"},
      {[](RawCall &r) { r.shapes[0][0] = r.shapes[2][0] = int64_t{1} << 31; },
       "row_add: size n (dimension 0 of argument 1 (A)) does not fit int32"},
      {[](RawCall &r) { r.shapes[2][0] = 2; },
       "row_add: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A))"},
      {[](RawCall &r) { r.shapes[1][0] = 5; }, "row_add: argument 2 (B): dimension 0 must be 4"},
      {[&](RawCall &r) { r.args[2].strides = transposed; }, "row_add: argument 3 (C): stride of dimension 0 must be 4"},
      {[&](RawCall &r) { r.args[2].strides = compact; }, ""},
      {[](RawCall &r) { r.args[2].strides = nullptr; }, ""},
  };
  for (const Case &k : cases) {
    SCOPED_TRACE(k.message.empty() ? "a good call" : k.message);
    for (const auto &[back_end, fn] : {std::pair{"LLVM", llvm_fn}, std::pair{"C", c_fn}}) {
      SCOPED_TRACE(back_end);
      RawCall r;
      k.spoil(r);
      const int32_t status = r.call(fn);
      const std::string message = back_end == std::string("LLVM") ? llvm.last_error() : c.last_error();
      if (k.message.empty()) {
        EXPECT_EQ(status, kKilnOk) << message;
        EXPECT_EQ(values<float>(r.tensors[2]), std::vector<float>(12, 3.0f));
      } else {
        EXPECT_EQ(status, kKilnErrorArgument);
        EXPECT_EQ(message, k.message);
      }
    }
  }
}

TEST(MakePackedApiTest, TheInterpreterRaisesTheSameMessages) {
  const ir::LoweredFunc f = row_add();
  const Tensor a = filled<float>({3, 4}, 1.0f), b = filled<float>({4}, 2.0f), c = filled<float>({3, 4}, 0.0f);
  expect_error<RuntimeError>([&] { interp::run(f, {a, b}); }, {"row_add: expected 3 arguments (A, B, C)"});
  expect_error<RuntimeError>(
      [&] {
        interp::run(f, {a, Tensor(), c});
      },
      {"row_add: argument 2 (B): the data pointer is null"});
  expect_error<RuntimeError>(
      [&] {
        interp::run(f, {a, filled<int32_t>({4}, 1), c});
      },
      {"row_add: argument 2 (B): expected dtype float32"});
  expect_error<RuntimeError>(
      [&] {
        interp::run(f, {a, b, filled<float>({2, 4}, 0.0f)});
      },
      {"row_add: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A))"});
  expect_error<RuntimeError>(
      [&] {
        interp::run(f, {a, filled<float>({5}, 0.0f), c});
      },
      {"row_add: argument 2 (B): dimension 0 must be 4"});
  interp::run(f, {a, b, c});
  EXPECT_EQ(values<float>(c), std::vector<float>(12, 3.0f));
}

// An assertion of the kernel itself is not an argument error.
TEST(MakePackedApiTest, KernelAssertionsReturnTheAssertStatus) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Var i("i");
  ir::Stmt body = loop(i, n, store(A, ir::Expr(1.0f), i));
  auto f = make_func("checked", {A}, {n}, ir::AssertStmtNode::make(n > 4, "n must be greater than 4", body));
  codegen::LLVMModule llvm(f, test::native_options());
  codegen::CModule c(f, KILN_C_COMPILER);
  const Tensor small = filled<float>({3}, 0.0f);
  EXPECT_EQ(llvm.call_status("checked", {small}), kKilnErrorAssert);
  EXPECT_EQ(llvm.last_error(), "n must be greater than 4");
  EXPECT_EQ(c.call({small}), kKilnErrorAssert);
  EXPECT_EQ(c.last_error(), "n must be greater than 4");
  expect_error<RuntimeError>([&] { interp::run(f, {small}); }, {"n must be greater than 4"});
}

}  // namespace
}  // namespace kiln
