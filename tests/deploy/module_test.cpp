// The runtime's module loader, on a module written by hand against the C ABI (fake_module.c):
// listing, calling, errors, and installing the thread pool.
#include "deploy/module.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deploy/thread_pool.h"

namespace kiln::deploy {
namespace {

Tensor floats(std::vector<int64_t> shape, float start) {
  Tensor t = Tensor::empty(std::move(shape), DType::of<float>());
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(ModuleTest, ListsFunctionsWithSignatures) {
  Module m = Module::load(KILN_FAKE_MODULE);
  ASSERT_EQ(m.functions().size(), 1u);
  const FunctionInfo &f = m.functions()[0];
  EXPECT_EQ(f.name, "scale2");
  EXPECT_EQ(f.signature, "scale2(x: float32[8], y: float32[8])");
  ASSERT_EQ(f.params.size(), 2u);
  EXPECT_EQ(f.params[1].name, "y");
  EXPECT_EQ(f.params[1].dtype, DType::of<float>());
  EXPECT_EQ(f.params[1].shape, std::vector<int64_t>{8});
  EXPECT_EQ(m.target(), "llvm");
  EXPECT_NE(m.find("scale2"), nullptr);
  EXPECT_EQ(m.find("nope"), nullptr);
}

TEST(ModuleTest, CallsThroughTheInstalledRuntime) {
  Module m = Module::load(KILN_FAKE_MODULE);
  // The loader installed the process's runtime into the module.
  void *lib = dlopen(KILN_FAKE_MODULE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  auto runtime = reinterpret_cast<const KilnRuntimeApi *(*)()>(dlsym(lib, "fake_module_runtime"));
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(runtime(), KilnGetRuntimeApi());
  dlclose(lib);

  Tensor x = floats({8}, 1.0f), y = floats({8}, 0.0f);
  m.call("scale2", {x, y});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y.data_as<float>()[i], 2.0f * static_cast<float>(i + 1));
}

TEST(ModuleTest, BadCallsRaiseClearErrors) {
  Module m = Module::load(KILN_FAKE_MODULE);
  Tensor x = floats({8}, 1.0f), y = floats({8}, 0.0f);
  try {
    m.call("scale3", {x, y});
    FAIL() << "expected ModuleError";
  } catch (const ModuleError &e) {
    EXPECT_NE(std::string(e.what()).find("no function scale3 (functions: scale2)"), std::string::npos) << e.what();
  }
  // The function's own checks answer; call() adds the signature to an argument error.
  auto expect_kernel_error = [&](const std::vector<Tensor> &args, int32_t code, const std::string &message) {
    try {
      m.call("scale2", args);
      ADD_FAILURE() << "expected KernelError: " << message;
    } catch (const KernelError &e) {
      EXPECT_EQ(e.code(), code);
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  const std::string signature = "; signature scale2(x: float32[8], y: float32[8])";
  expect_kernel_error({x}, kKilnErrorArgument, "scale2: expected 2 arguments (x, y)" + signature);
  expect_kernel_error({x, floats({9}, 0)}, kKilnErrorArgument,
                      "scale2: argument 2 (y): dimension 0 must be 8" + signature);
  expect_kernel_error({x, Tensor::empty({8}, DType::of<int32_t>())}, kKilnErrorArgument,
                      "scale2: argument 2 (y): expected dtype float32" + signature);
  expect_kernel_error({x, Tensor()}, kKilnErrorArgument,
                      "scale2: argument 2 (y): the data pointer is null" + signature);
  expect_kernel_error({floats({9}, 0).view(1, {8}), y}, kKilnErrorArgument,
                      "scale2: argument 1 (x): the data pointer is not 64-byte aligned" + signature);
  // A failure of the kernel itself is not about the signature.
  expect_kernel_error({floats({8}, -1.0f), y}, kKilnErrorAssert, "scale2: x[0] must not be negative");
  EXPECT_EQ(m.call_status("scale2", {x}), kKilnErrorArgument);
  EXPECT_EQ(m.last_error(), "scale2: expected 2 arguments (x, y)");
  EXPECT_EQ(m.kernel_error("scale2", kKilnErrorArgument).what(), "scale2: expected 2 arguments (x, y)" + signature);
}

TEST(ModuleTest, LoadErrors) {
  EXPECT_THROW(Module::load("/nonexistent/libnothing.so"), ModuleError);
  // The caller named the wrong file: a user error, which the tools report as such.
  EXPECT_THROW(Module::load("/nonexistent/libnothing.so"), kiln::UserError);
  try {
    Module::load(KILN_FAKE_MODULE_FUTURE);
    FAIL() << "expected ModuleError";
  } catch (const ModuleError &e) {
    EXPECT_NE(std::string(e.what()).find("ABI version 99"), std::string::npos) << e.what();
  }
  Module empty;
  EXPECT_FALSE(empty.defined());
  EXPECT_TRUE(empty.functions().empty());
  EXPECT_THROW(empty.get_function("x"), ModuleError);
}

TEST(ModuleTest, ModuleOutlivesCopies) {
  Tensor x = floats({8}, 3.0f), y = floats({8}, 0.0f);
  KilnPackedFunc fn;
  {
    Module m = Module::load(KILN_FAKE_MODULE);
    Module copy = m;
    m = Module();
    fn = copy.get_function("scale2");
    copy.call("scale2", {x, y});
  }
  (void)fn;
  EXPECT_EQ(y.data_as<float>()[0], 6.0f);
}

TEST(ModuleTest, KilnArgsDescribeTensors) {
  Tensor t = Tensor::empty({2, 3}, DType{DType::Float, 16, 1});
  const std::vector<Tensor> tensors = {t};
  std::vector<KilnArg> args = to_kiln_args(tensors);
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].data, t.data());
  EXPECT_EQ(args[0].ndim, 2);
  EXPECT_EQ(args[0].shape[1], 3);
  EXPECT_EQ(args[0].strides[0], 3);
  EXPECT_EQ(args[0].dtype_code, kKilnFloat);
  EXPECT_EQ(args[0].dtype_bits, 16);
  EXPECT_EQ(args[0].dtype_lanes, 1);
}

}  // namespace
}  // namespace kiln::deploy
