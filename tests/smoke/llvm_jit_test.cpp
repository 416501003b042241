// The LLVM back end's JIT compiles IR built with LLVM's IRBuilder and runs it.
#include "compiler/codegen/llvm/llvm_jit.h"

#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace kiln::codegen {
namespace {

// A module with `int32_t name(int32_t a, int32_t b) { return a * b + a; }`.
std::pair<std::unique_ptr<llvm::Module>, std::unique_ptr<llvm::LLVMContext>> make_mul_add(const std::string &name) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("mul_add_module", *context);
  llvm::IRBuilder<> b(*context);
  llvm::Type *i32 = b.getInt32Ty();
  auto *type = llvm::FunctionType::get(i32, {i32, i32}, false);
  auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, *module);
  b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", fn));
  llvm::Value *a = fn->getArg(0);
  llvm::Value *x = fn->getArg(1);
  b.CreateRet(b.CreateAdd(b.CreateMul(a, x), a));
  return {std::move(module), std::move(context)};
}

TEST(LLVMJitTest, CompilesAndRunsIRBuilderFunction) {
  LLVMJit jit;
  EXPECT_FALSE(jit.target_triple().empty());
  auto [module, context] = make_mul_add("mul_add");
  jit.add_module(std::move(module), std::move(context));

  auto *mul_add = jit.lookup_function<int32_t(int32_t, int32_t)>("mul_add");
  ASSERT_NE(mul_add, nullptr);
  EXPECT_EQ(mul_add(6, 7), 48);
  EXPECT_EQ(mul_add(-3, 5), -18);
}

TEST(LLVMJitTest, UnknownSymbolThrows) {
  LLVMJit jit;
  EXPECT_THROW(jit.lookup("no_such_function"), LLVMJitError);
  // Symbols come from Kiln's own code generator: a missing one is a bug in Kiln.
  EXPECT_THROW(jit.lookup("no_such_function"), kiln::InternalError);
}

TEST(LLVMJitTest, InvalidModuleIsRejected) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("broken", *context);
  llvm::IRBuilder<> b(*context);
  auto *type = llvm::FunctionType::get(b.getInt32Ty(), {}, false);
  auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "broken", *module);
  // A block without a terminator.
  b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", fn));
  b.CreateAdd(b.getInt32(1), b.getInt32(2));

  LLVMJit jit;
  EXPECT_THROW(jit.add_module(std::move(module), std::move(context)), LLVMJitError);
}

TEST(LLVMJitTest, JitsCanBeCreatedFromSeveralThreads) {
  std::vector<int32_t> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i, &results] {
      LLVMJit jit;
      auto [module, context] = make_mul_add("f");
      jit.add_module(std::move(module), std::move(context));
      results[i] = jit.lookup_function<int32_t(int32_t, int32_t)>("f")(i, 10);
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(results, (std::vector<int32_t>{0, 11, 22, 33}));
}

}  // namespace
}  // namespace kiln::codegen
