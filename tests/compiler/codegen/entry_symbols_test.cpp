// Kernels named like functions of the C library run as themselves through every back end: the
// entry points are exported only under prefixed names (kiln_fn_<name>), and a module's table
// refers to its own definitions, so the dynamic linker cannot bind them to libc's `bind`.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "compiler/codegen/c/c_module.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "deploy/module.h"
#include "tests/compiler/codegen/llvm_harness.h"
#include "tests/compiler/interp/both_backends.h"
#include "tests/temp_dir.h"

namespace kiln {
namespace {

using deploy::Tensor;
using test::filled;
using test::make_tensor;
using test::values;

const std::vector<std::string> kLibraryNames = {"bind", "fmaxf", "malloc", "main"};

// C[i] = A[i] * 3 - B[i] over a symbolic length, lowered under `name`.
ir::LoweredFunc scaled_difference(const std::string &name) {
  ir::Var n = te::var("n");
  auto A = te::placeholder({n}, ir::Float(32), "A");
  auto B = te::placeholder({n}, ir::Float(32), "B");
  auto C = te::compute(
      {n}, [&](ir::Var i) { return A(i) * 3.0f - B(i); }, "C");
  auto s = te::create_schedule({C});
  return lower::lower(*s, {A, B, C}, name);
}

struct Inputs {
  std::vector<float> a, b, expected;
  Inputs() {
    for (int i = 0; i < 37; ++i) {
      a.push_back(0.5f * static_cast<float>(i) - 4.0f);
      b.push_back(static_cast<float>(i % 5));
      expected.push_back(a.back() * 3.0f - b.back());
    }
  }
  std::vector<Tensor> args() const {
    const int64_t n = static_cast<int64_t>(a.size());
    return {make_tensor<float>({n}, a), make_tensor<float>({n}, b), filled<float>({n}, -1.0f)};
  }
};

using test::TempDir;

TEST(EntrySymbolsTest, TheInterpreterRunsThem) {
  const Inputs in;
  for (const auto &name : kLibraryNames) {
    SCOPED_TRACE(name);
    std::vector<Tensor> args = in.args();
    interp::run(scaled_difference(name), args);
    EXPECT_EQ(values<float>(args[2]), in.expected);
  }
}

TEST(EntrySymbolsTest, TheLLVMJitRunsThem) {
  const Inputs in;
  std::vector<ir::LoweredFunc> funcs;
  for (const auto &name : kLibraryNames) funcs.push_back(scaled_difference(name));
  codegen::LLVMModule m(funcs, test::native_options());
  for (const auto &name : kLibraryNames) {
    SCOPED_TRACE(name);
    std::vector<Tensor> args = in.args();
    ASSERT_EQ(m.call_status(name, args), kKilnOk) << m.last_error();
    EXPECT_EQ(values<float>(args[2]), in.expected);
  }
}

TEST(EntrySymbolsTest, ALibraryExportedByLLVMRunsThemAndExportsPrefixedEntries) {
  const Inputs in;
  TempDir dir;
  const std::string lib = dir.file("libnames.so");
  std::vector<ir::LoweredFunc> funcs;
  for (const auto &name : kLibraryNames) funcs.push_back(scaled_difference(name));
  codegen::export_library(funcs, lib, test::native_options());
  deploy::Module m = deploy::Module::load(lib);
  ASSERT_EQ(m.functions().size(), kLibraryNames.size());
  void *handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  for (const auto &name : kLibraryNames) {
    SCOPED_TRACE(name);
    EXPECT_EQ(m.find(name)->signature, name + "(A: float32[n], B: float32[n], C: float32[n])");
    std::vector<Tensor> args = in.args();
    ASSERT_EQ(m.call_status(name, args), kKilnOk) << m.last_error();
    EXPECT_EQ(values<float>(args[2]), in.expected);
    // The exported symbol is the same entry point.
    auto exported = reinterpret_cast<KilnPackedFunc>(dlsym(handle, (KILN_FUNCTION_SYMBOL_PREFIX + name).c_str()));
    ASSERT_NE(exported, nullptr);
    args = in.args();
    std::vector<KilnArg> c_args = deploy::to_kiln_args(args);
    ASSERT_EQ(exported(c_args.data(), static_cast<int32_t>(c_args.size())), kKilnOk) << m.last_error();
    EXPECT_EQ(values<float>(args[2]), in.expected);
  }
  dlclose(handle);
}

TEST(EntrySymbolsTest, TheCBackEndRunsThem) {
  const Inputs in;
  for (const auto &name : kLibraryNames) {
    SCOPED_TRACE(name);
    codegen::CModule m(scaled_difference(name), KILN_C_COMPILER);
    std::vector<Tensor> args = in.args();
    ASSERT_EQ(m.call(args), kKilnOk) << m.last_error();
    EXPECT_EQ(values<float>(args[2]), in.expected);
    EXPECT_NE(m.source().find("\nint32_t " KILN_FUNCTION_SYMBOL_PREFIX + name + "(const KilnArg* args"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
