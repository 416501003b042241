// The LLVM back end's products: the checked entry point, targets, JIT compilation on several
// threads at once, object files, and shared libraries that load and run in another process.
#include "compiler/codegen/llvm/llvm_module.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "tests/compiler/codegen/llvm_harness.h"
#include "tests/compiler/schedule/corpus.h"
#include "tests/compiler/schedule/harness.h"
#include "tests/temp_dir.h"

namespace kiln {
namespace {

using codegen::LLVMBuildOptions;
using codegen::LLVMModule;
using codegen::LLVMTarget;
using deploy::Tensor;
using ir::Buffer;
using ir::Float;
using ir::Int;
using ir::Var;
using test::filled;
using test::load;
using test::loop;
using test::make_func;
using test::make_tensor;
using test::native_options;
using test::row_add;
using test::store;
using test::values;

using test::TempDir;

// ---------------------------------------------------------------------------------------------
// The entry point checks its arguments.

struct RawArgs {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<Tensor> tensors;
  std::vector<KilnArg> args;
  explicit RawArgs(std::vector<Tensor> ts) : tensors(std::move(ts)) {
    args = deploy::to_kiln_args(tensors);
    for (auto &a : args) {
      shapes.emplace_back(a.shape, a.shape + a.ndim);
      a.strides = nullptr;
    }
    for (size_t i = 0; i < args.size(); ++i) args[i].shape = shapes[i].data();
  }
};

TEST(LLVMEntryTest, BadCallsReturnClearErrors) {
  LLVMModule m(row_add(), native_options());
  KilnPackedFunc fn = m.function("row_add");
  auto make = [] {
    return RawArgs({filled<float>({3, 4}, 1.0f), filled<float>({4}, 2.0f), filled<float>({3, 4}, 0.0f)});
  };
  auto expect = [&](RawArgs &r, int32_t num, const std::string &message) {
    EXPECT_EQ(fn(r.args.data(), num), kKilnErrorArgument) << message;
    EXPECT_EQ(m.last_error(), message);
  };
  {
    RawArgs r = make();
    EXPECT_EQ(fn(r.args.data(), 3), 0) << m.last_error();
    EXPECT_EQ(values<float>(r.tensors[2]), std::vector<float>(12, 3.0f));
  }
  {
    RawArgs r = make();
    expect(r, 2, "row_add: expected 3 arguments (A, B, C)");
    EXPECT_EQ(fn(nullptr, 3), kKilnErrorArgument);
    EXPECT_EQ(m.last_error(), "row_add: the argument list is null");
  }
  {
    RawArgs r = make();
    r.args[1].data = nullptr;
    expect(r, 3, "row_add: argument 2 (B): the data pointer is null");
  }
  {
    RawArgs r = make();
    r.args[0].data = static_cast<char *>(r.args[0].data) + 4;
    expect(r, 3, "row_add: argument 1 (A): the data pointer is not 64-byte aligned");
  }
  {
    RawArgs r = make();
    r.args[2].ndim = 1;
    expect(r, 3, "row_add: argument 3 (C): expected 2 dimensions");
  }
  {
    RawArgs r = make();
    r.args[1].dtype_code = kKilnInt;
    expect(r, 3, "row_add: argument 2 (B): expected dtype float32");
    r = make();
    r.args[1].dtype_lanes = 4;
    expect(r, 3, "row_add: argument 2 (B): expected dtype float32");
  }
  {
    RawArgs r = make();
    r.shapes[2][0] = 2;
    expect(r, 3, "row_add: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A))");
  }
  {
    RawArgs r = make();
    r.shapes[1][0] = 5;
    expect(r, 3, "row_add: argument 2 (B): dimension 0 must be 4");
  }
  {
    RawArgs r = make();
    r.shapes[0][0] = -1;
    expect(r, 3, "row_add: argument 1 (A): dimension 0 is negative");
  }
  {
    RawArgs r = make();
    r.shapes[0][0] = int64_t{1} << 31;
    r.shapes[2][0] = int64_t{1} << 31;
    expect(r, 3, "row_add: size n (dimension 0 of argument 1 (A)) does not fit int32");
  }
  {
    RawArgs r = make();
    r.args[0].shape = nullptr;
    expect(r, 3, "row_add: argument 1 (A): the shape pointer is null");
  }
  {
    RawArgs r = make();
    const int64_t transposed[] = {1, 3};
    r.args[2].strides = transposed;
    expect(r, 3, "row_add: argument 3 (C): stride of dimension 0 must be 4");
    const int64_t compact[] = {4, 1};
    r.args[2].strides = compact;
    EXPECT_EQ(fn(r.args.data(), 3), 0);
  }
}

TEST(LLVMEntryTest, ModuleCallReportsTheEntrysCheckWithTheSignature) {
  LLVMModule m(row_add(), native_options());
  Tensor a = filled<float>({3, 4}, 1.0f), b = filled<float>({4}, 2.0f), c = filled<float>({2, 4}, 0.0f);
  try {
    m.call("row_add", {a, b, c});
    FAIL() << "expected KernelError";
  } catch (const deploy::KernelError &e) {
    EXPECT_EQ(e.code(), kKilnErrorArgument);
    EXPECT_STREQ(e.what(),
                 "row_add: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A)); "
                 "signature row_add(A: float32[n, 4], B: float32[4], C: float32[n, 4])");
  }
  const auto &fns = m.module().functions();
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].signature, "row_add(A: float32[n, 4], B: float32[4], C: float32[n, 4])");
  EXPECT_EQ(fns[0].params[0].shape, (std::vector<int64_t>{-1, 4}));
}

// A buffer with declared strides (a column of a matrix): the entry point checks them.
TEST(LLVMEntryTest, DeclaredStridesAreChecked) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n, 2});
  A.strides = {ir::Expr(1), n};  // column-major
  Buffer O = ir::make_buffer("O", Float(32), {n});
  Var i("i");
  auto f = make_func("col", {A, O}, {n}, loop(i, n, store(O, load(A, i + n), i)));
  LLVMModule m(f, native_options());
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});  // column-major storage of a 3x2 matrix
  Tensor o = filled<float>({3}, 0.0f);
  RawArgs r({a, o});
  r.shapes[0] = {3, 2};
  const int64_t column_major[] = {1, 3};
  r.args[0].strides = column_major;
  ASSERT_EQ(m.function("col")(r.args.data(), 2), 0) << m.last_error();
  EXPECT_EQ(values<float>(r.tensors[1]), (std::vector<float>{4, 5, 6}));
  const int64_t wrong[] = {2, 1};
  r.args[0].strides = wrong;
  EXPECT_EQ(m.function("col")(r.args.data(), 2), kKilnErrorArgument);
  EXPECT_EQ(m.last_error(), "col: argument 1 (A): stride of dimension 0 must be 1");
  r.args[0].strides = nullptr;
  EXPECT_EQ(m.function("col")(r.args.data(), 2), kKilnErrorArgument);
  EXPECT_EQ(m.last_error(), "col: argument 1 (A): the tensor is compact but the function expects other strides");
}

// ---------------------------------------------------------------------------------------------
// Targets

TEST(LLVMTargetTest, ParsesTargetStrings) {
  const LLVMTarget host = LLVMTarget::host();
  EXPECT_TRUE(host.runs_on_host());
  EXPECT_EQ(host.str, "llvm -mcpu=native");
  EXPECT_GT(host.vector_bits(), 0);

  const LLVMTarget plain = LLVMTarget::parse("llvm");
  EXPECT_EQ(plain.triple, host.triple);
  EXPECT_TRUE(plain.runs_on_host());
  if (plain.triple.rfind("x86_64", 0) != 0) GTEST_SKIP() << "the rest is about x86-64 targets";
  EXPECT_EQ(plain.cpu, "x86-64");
  EXPECT_EQ(plain.vector_bits(), 128);
  EXPECT_FALSE(plain.has_feature("avx2"));

  const LLVMTarget zen4 = LLVMTarget::parse("llvm -mcpu=znver4");
  EXPECT_EQ(zen4.str, "llvm -mcpu=znver4");
  EXPECT_TRUE(zen4.has_feature("avx512f"));
  EXPECT_TRUE(zen4.has_feature("avx512bw"));
  EXPECT_TRUE(zen4.has_feature("fma"));
  EXPECT_EQ(zen4.vector_bits(), 512);

  const LLVMTarget avx2 = LLVMTarget::parse("llvm  -mtriple=x86_64-linux-gnu   -mattr=+avx2,+fma");
  EXPECT_EQ(avx2.str, "llvm -mattr=+avx2,+fma -mtriple=x86_64-linux-gnu");
  EXPECT_EQ(avx2.triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(avx2.features, (std::vector<std::string>{"+avx2", "+fma"}));
  EXPECT_TRUE(avx2.has_feature("fma"));
  EXPECT_EQ(avx2.vector_bits(), 256);

  EXPECT_EQ(LLVMTarget::parse("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_bits(), 256);
}

// The native target names the host's CPU, or for a CPU this LLVM does not know the nearest one it
// does (never "generic" on x86-64), with the few features where the host differs: a target string
// the farm's tracker takes and a person can read. It describes the host exactly: its features
// are the host's.
TEST(LLVMTargetTest, TheNativeTargetNamesTheNearestKnownCpuAndTheHostsFeatures) {
  const std::string native = codegen::resolve_native("llvm -mcpu=native");
  const LLVMTarget host = LLVMTarget::host(), resolved = LLVMTarget::parse(native);
  if (host.triple.rfind("x86_64", 0) == 0) {
    EXPECT_NE(codegen::host_cpu_name(), "generic") << native;
    EXPECT_NE(host.cpu, "generic") << "the scheduling model of a named CPU";
  }
  EXPECT_LT(native.size(), 256u) << native;
  for (const char *f : {"avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "sse4.2"})
    EXPECT_EQ(resolved.has_feature(f), host.has_feature(f)) << f << " in " << native;
}

TEST(LLVMTargetTest, EverySpellingOfATargetParsesToTheCanonicalOne) {
  const LLVMTarget a = LLVMTarget::parse("llvm -mcpu=haswell -mattr=+avx2");
  for (const char *spelling : {"llvm -mattr=+avx2 -mcpu=haswell", "  llvm\t--mcpu=haswell   -mattr=+avx2 ",
                               "llvm --mattr=+avx2 --mcpu=haswell"}) {
    const LLVMTarget b = LLVMTarget::parse(spelling);
    EXPECT_EQ(b.str, "llvm -mattr=+avx2 -mcpu=haswell") << spelling;
    EXPECT_EQ(b.cpu, a.cpu) << spelling;
    EXPECT_EQ(b.features, a.features) << spelling;
  }
}

TEST(LLVMTargetTest, BadTargetStringsAreUserErrors) {
  auto expect_error = [](const std::string &s, const std::string &part) {
    test::expect_error<UserError>([&] { LLVMTarget::parse(s); }, {part});
  };
  expect_error("cuda -arch=sm_90", "starts with \"llvm\"");
  expect_error("", "empty target");
  expect_error("llvm -mcpu", "-mcpu needs a value");
  expect_error("llvm -mcpu=pentium9000", "does not know the CPU pentium9000");
  expect_error("llvm -O3", "unknown option -O3");
  expect_error("llvm -mattr=avx2", "must start with + or -");
  expect_error("llvm -mcpu=znver3 -mcpu=znver4", "-mcpu is given twice");
  expect_error("llvm -mtriple=nonsense-arch-linux", "does not support triple");
}

TEST(LLVMTargetTest, CrossTargetsExportButDoNotRunHere) {
  const LLVMTarget host = LLVMTarget::host();
  const std::string cross =
      host.triple.rfind("aarch64", 0) == 0 ? "llvm -mtriple=x86_64-linux-gnu" : "llvm -mtriple=aarch64-linux-gnu";
  LLVMBuildOptions o;
  o.target = cross;
  EXPECT_FALSE(LLVMTarget::parse(cross).runs_on_host());
  test::expect_error<UserError>([&] { LLVMModule m(row_add(), o); }, {"cannot run on this host"});
  TempDir dir;
  codegen::export_object({row_add()}, dir.file("row_add.o"), o);
  std::ifstream in(dir.file("row_add.o"), std::ios::binary);
  char header[20] = {};
  in.read(header, sizeof header);
  EXPECT_EQ(std::string(header, 4),
            "\x7f"
            "ELF");
  const uint16_t machine =
      static_cast<uint16_t>(static_cast<uint8_t>(header[18]) | (static_cast<uint8_t>(header[19]) << 8));
  EXPECT_EQ(machine, cross.find("aarch64") != std::string::npos ? 183 : 62);
  EXPECT_FALSE(codegen::emit_assembly({row_add()}, o).empty());
}

// ---------------------------------------------------------------------------------------------
// Compiling on several threads at once

TEST(LLVMModuleTest, FourThreadsCompileAndRunAtOnce) {
  const auto corpus = testing::corpus();
  std::vector<std::string> failures(4);
  std::vector<double> ms(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int rep = 0; rep < 2; ++rep) {
          testing::CorpusOp op = corpus[static_cast<size_t>(t * 2 + rep)]();
          auto s = te::create_schedule(std::vector<te::Operation>{op.args.back().op()});
          ir::LoweredFunc f = lower::lower(*s, op.args, "op" + std::to_string(t));
          auto in = testing::make_args(f, op.shapes, 5);
          auto expect = testing::run_interp(f, in);
          LLVMModule m(f, native_options());
          ms[static_cast<size_t>(t)] += m.times().total_ms();
          std::vector<Tensor> got;
          for (const auto &a : in) got.push_back(testing::clone(a));
          m.call(f.name, got);
          for (size_t i = 0; i < got.size(); ++i) {
            if (testing::max_diff(expect[i], got[i]) > op.tolerance)
              failures[static_cast<size_t>(t)] += op.name + " differs; ";
          }
        }
      } catch (const std::exception &e) {
        failures[static_cast<size_t>(t)] += e.what();
      }
    });
  }
  for (auto &th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], "") << "thread " << t;
    EXPECT_GT(ms[static_cast<size_t>(t)], 0.0);
  }
}

TEST(LLVMModuleTest, ReportsCompileTimesAndKeepsIRAndAssembly) {
  LLVMBuildOptions o = native_options();
  o.keep_llvm_ir = true;
  o.keep_assembly = true;
  LLVMModule m(row_add(), o);
  const auto &t = m.times();
  EXPECT_GT(t.codegen_ms, 0.0);
  EXPECT_GT(t.optimize_ms, 0.0);
  EXPECT_GT(t.emit_ms, 0.0);
  EXPECT_GT(t.link_ms, 0.0);
  EXPECT_NEAR(t.total_ms(), t.codegen_ms + t.optimize_ms + t.emit_ms + t.link_ms, 1e-9);
  EXPECT_NE(m.llvm_ir().find("define internal i32 @row_add__entry(%KilnArg*"), std::string::npos) << m.llvm_ir();
  EXPECT_NE(m.llvm_ir().find("@kiln_fn_row_add = alias"), std::string::npos) << m.llvm_ir();
  EXPECT_NE(m.assembly().find("row_add__entry:"), std::string::npos);
  EXPECT_EQ(m.module().target(), "llvm -mcpu=native");
  LLVMModule quiet(row_add(), native_options());
  EXPECT_TRUE(quiet.llvm_ir().empty());
  EXPECT_TRUE(quiet.assembly().empty());
}

// ---------------------------------------------------------------------------------------------
// Shared libraries

int run_command(const std::string &cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(LLVMLibraryTest, LoadsAndRunsInThisProcess) {
  TempDir dir;
  const std::string lib = dir.file("librow.so");
  ir::LoweredFunc f = row_add();
  ir::LoweredFunc g =
      test::make_func("scale", {ir::make_buffer("X", Int(32), {8})}, {}, loop(Var("i"), 8, ir::EvaluateNode::make(0)));
  {
    Var i("i");
    Buffer X = g.params[0];
    g.body = loop(i, 8, store(X, load(X, i) * 3, i), ir::ForKind::Parallel);
  }
  const auto times = codegen::export_library({f, g}, lib, native_options());
  EXPECT_GT(times.link_ms, 0.0);
  deploy::Module m = deploy::Module::load(lib);
  ASSERT_EQ(m.functions().size(), 2u);
  EXPECT_EQ(m.functions()[0].signature, "row_add(A: float32[n, 4], B: float32[4], C: float32[n, 4])");
  EXPECT_EQ(m.functions()[1].signature, "scale(X: int32[8])");
  Tensor x = make_tensor<int32_t>({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  m.call("scale", {x});
  EXPECT_EQ(values<int32_t>(x), (std::vector<int32_t>{3, 6, 9, 12, 15, 18, 21, 24}));
}

// deploy::Module::call on an exported library relies on the entry's checks: each bad call raises
// KernelError(kKilnErrorArgument) naming the argument, followed by the signature.
TEST(LLVMLibraryTest, BadCallsReportTheArgumentAndTheSignature) {
  TempDir dir;
  const std::string lib = dir.file("librow.so");
  codegen::export_library({row_add()}, lib, native_options());
  deploy::Module m = deploy::Module::load(lib);
  const std::string signature = "; signature row_add(A: float32[n, 4], B: float32[4], C: float32[n, 4])";
  Tensor a = filled<float>({3, 4}, 1.0f), b = filled<float>({4}, 2.0f), c = filled<float>({3, 4}, 0.0f);
  Tensor big = filled<float>({13}, 0.0f);
  const struct {
    std::vector<Tensor> args;
    std::string message;
  } cases[] = {
      {{a, filled<int32_t>({4}, 1), c}, "row_add: argument 2 (B): expected dtype float32"},
      {{a, filled<float>({5}, 2.0f), c}, "row_add: argument 2 (B): dimension 0 must be 4"},
      {{a, b}, "row_add: expected 3 arguments (A, B, C)"},
      {{big.view(1, {3, 4}), b, c}, "row_add: argument 1 (A): the data pointer is not 64-byte aligned"},
      {{a, b, Tensor()}, "row_add: argument 3 (C): the data pointer is null"},
  };
  for (const auto &k : cases) {
    try {
      m.call("row_add", k.args);
      ADD_FAILURE() << "expected KernelError: " << k.message;
    } catch (const deploy::KernelError &e) {
      EXPECT_EQ(e.code(), kKilnErrorArgument) << e.what();
      EXPECT_EQ(std::string(e.what()), k.message + signature);
    }
  }
  m.call("row_add", {a, b, c});
  EXPECT_EQ(values<float>(c), std::vector<float>(12, 3.0f));
}

// The library is built here and run by kiln_module_runner, a program that links only the
// runtime, in a process of its own.
TEST(LLVMLibraryTest, RunsInAFreshProcess) {
  TempDir dir;
  testing::CorpusOp op = testing::corpus_conv2d();
  auto s = te::create_schedule(std::vector<te::Operation>{op.args.back().op()});
  ir::IterVar o, in;
  te::Stage conv = (*s)[op.args.back()];
  conv.split(conv.axis(1), 2, &o, &in);
  conv.parallel(o);
  ir::LoweredFunc f = lower::lower(*s, op.args, "conv");
  const std::string lib = dir.file("libconv.so");
  codegen::export_library({f}, lib, native_options());

  EXPECT_EQ(run_command(std::string(KILN_MODULE_RUNNER) + " " + lib + " --list > " + dir.file("list.txt")), 0);
  EXPECT_EQ(read_text(dir.file("list.txt")),
            "conv: conv(X: float32[1, 3, 9, 9], W: float32[4, 3, 3, 3], conv: float32[1, 4, 5, 5])\n");

  auto args = testing::make_args(f, op.shapes, 3);
  auto expect = testing::run_interp(f, args);
  {
    std::ofstream out(dir.file("in.bin"), std::ios::binary);
    for (const auto &a : args) out.write(static_cast<const char *>(a.data()), static_cast<std::streamsize>(a.nbytes()));
  }
  ASSERT_EQ(run_command("KILN_NUM_THREADS=2 " + std::string(KILN_MODULE_RUNNER) + " " + lib + " conv " +
                        dir.file("in.bin") + " " + dir.file("out.bin")),
            0);
  std::ifstream result(dir.file("out.bin"), std::ios::binary);
  for (size_t i = 0; i < args.size(); ++i) {
    Tensor got = Tensor::empty(args[i].shape(), args[i].dtype());
    result.read(static_cast<char *>(got.data()), static_cast<std::streamsize>(got.nbytes()));
    ASSERT_TRUE(result) << "output too short";
    EXPECT_LE(testing::max_diff(expect[i], got), op.tolerance) << "argument " << i;
  }
  // A bad library path and a failing call report errors, not crashes.
  EXPECT_EQ(run_command(std::string(KILN_MODULE_RUNNER) + " " + dir.file("nothing.so") + " --list 2> /dev/null"), 1);
}

TEST(LLVMLibraryTest, LinkFailureIsAUserError) {
  TempDir dir;
  test::expect_error<UserError>(
      [&] { codegen::export_library({row_add()}, dir.file("x.so"), native_options(), "false"); },
      {"linking", "failed"});
}

}  // namespace
}  // namespace kiln
