#include "compiler/codegen/llvm/llvm_jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <mutex>

namespace kiln::codegen {

namespace {

std::string to_message(llvm::Error error) { return llvm::toString(std::move(error)); }

void initialize_native_target() {
  static std::once_flag once;
  static bool failed = false;
  std::call_once(once, [] {
    // Each returns true on failure.
    failed = llvm::InitializeNativeTarget() || llvm::InitializeNativeTargetAsmPrinter() ||
             llvm::InitializeNativeTargetAsmParser();
  });
  if (failed) throw LLVMJitError("llvm jit: the host target is not available in this LLVM");
}

}  // namespace

struct LLVMJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

LLVMJit::LLVMJit() : impl_(std::make_unique<Impl>()) {
  initialize_native_target();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) throw LLVMJitError("llvm jit: cannot create: " + to_message(jit.takeError()));
  impl_->jit = std::move(*jit);

  const llvm::DataLayout &layout = impl_->jit->getDataLayout();
  auto process_symbols = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(layout.getGlobalPrefix());
  if (!process_symbols) {
    throw LLVMJitError("llvm jit: cannot search the process for symbols: " + to_message(process_symbols.takeError()));
  }
  impl_->jit->getMainJITDylib().addGenerator(std::move(*process_symbols));
}

LLVMJit::~LLVMJit() = default;

std::string LLVMJit::target_triple() const { return impl_->jit->getTargetTriple().str(); }

std::string LLVMJit::data_layout() const { return impl_->jit->getDataLayout().getStringRepresentation(); }

void LLVMJit::add_module(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context) {
  if (!module || !context) throw LLVMJitError("llvm jit: add_module needs a module and a context");
  if (&module->getContext() != context.get()) {
    throw LLVMJitError("llvm jit: module " + module->getName().str() + " was not built in the context passed with it");
  }
  std::string problems;
  llvm::raw_string_ostream problem_stream(problems);
  if (llvm::verifyModule(*module, &problem_stream)) {
    throw LLVMJitError("llvm jit: module " + module->getName().str() + " is invalid: " + problem_stream.str());
  }
  if (module->getDataLayout().isDefault()) module->setDataLayout(impl_->jit->getDataLayout());
  if (module->getTargetTriple().empty()) {
    module->setTargetTriple(impl_->jit->getTargetTriple().str());
  }
  std::string name = module->getName().str();
  llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(context));
  if (llvm::Error error = impl_->jit->addIRModule(std::move(tsm))) {
    throw LLVMJitError("llvm jit: cannot add module " + name + ": " + to_message(std::move(error)));
  }
}

void LLVMJit::add_object_file(const std::string &object, const std::string &name) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, name);
  if (llvm::Error error = impl_->jit->addObjectFile(std::move(buffer))) {
    throw LLVMJitError("llvm jit: cannot add object " + name + ": " + to_message(std::move(error)));
  }
}

uint64_t LLVMJit::lookup(const std::string &name) {
  auto symbol = impl_->jit->lookup(name);
  if (!symbol) {
    throw LLVMJitError("llvm jit: symbol " + name + ": " + to_message(symbol.takeError()));
  }
  return symbol->getAddress();
}

}  // namespace kiln::codegen
