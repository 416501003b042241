#include "compiler/codegen/llvm/llvm_module.h"

#include "compiler/codegen/common/system_tool.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/codegen/llvm/llvm_jit.h"
#include "compiler/ir/error.h"

namespace kiln::codegen {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// What one compilation produced.
struct Compiled {
  LLVMTarget target;
  std::string object;
  std::string llvm_ir;
  std::string assembly;
  LLVMCompileTimes times;
};

void optimize(llvm::Module &module, llvm::TargetMachine &tm, int opt_level, bool unroll) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = unroll && opt_level >= 2;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::PassBuilder pb(&tm, tuning);
  const llvm::Triple triple(module.getTargetTriple());
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(llvm::TargetLibraryInfoImpl(triple)); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = llvm::OptimizationLevel::O3;
  if (opt_level == 1) level = llvm::OptimizationLevel::O1;
  if (opt_level == 2) level = llvm::OptimizationLevel::O2;
  llvm::ModulePassManager mpm =
      opt_level <= 0 ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0) : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

std::string machine_code(llvm::Module &module, llvm::TargetMachine &tm, llvm::CodeGenFileType type) {
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) {
    throw UserError("LLVM back end: target " + tm.getTargetTriple().str() + " cannot emit this kind of file");
  }
  pm.run(module);
  return std::string(buffer.begin(), buffer.end());
}

std::string print(const llvm::Module &module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, nullptr);
  return os.str();
}

enum class Stop { BeforeOptimize, AfterOptimize, Object };

Compiled compile(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options, Stop stop) {
  Compiled out;
  out.target = LLVMTarget::parse(options.target);
  std::unique_ptr<llvm::TargetMachine> tm = create_target_machine(out.target, options.opt_level);
  llvm::LLVMContext context;

  auto t = Clock::now();
  LLVMCodegenOptions cg;
  cg.fp_contract = options.fp_contract;
  cg.approx_math = options.approx_math;
  std::unique_ptr<llvm::Module> module = codegen_llvm(funcs, out.target, *tm, context, cg);
  {
    std::string problems;
    llvm::raw_string_ostream ps(problems);
    if (llvm::verifyModule(*module, &ps)) {
      throw InternalError("LLVM back end: the generated module is invalid: " + ps.str());
    }
  }
  out.times.codegen_ms = ms_since(t);
  if (stop == Stop::BeforeOptimize) {
    out.llvm_ir = print(*module);
    return out;
  }

  t = Clock::now();
  optimize(*module, *tm, options.opt_level, options.llvm_unroll);
  out.times.optimize_ms = ms_since(t);
  if (options.keep_llvm_ir || stop == Stop::AfterOptimize) out.llvm_ir = print(*module);
  if (stop == Stop::AfterOptimize) return out;

  if (options.keep_assembly) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*module);
    out.assembly = machine_code(*copy, *tm, llvm::CGFT_AssemblyFile);
  }
  t = Clock::now();
  out.object = machine_code(*module, *tm, llvm::CGFT_ObjectFile);
  out.times.emit_ms = ms_since(t);
  return out;
}

void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw UserError("LLVM back end: cannot write " + path);
}

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln_llvm_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw UserError("LLVM back end: cannot create a temporary directory " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

struct LLVMModule::Impl {
  Compiled compiled;
  deploy::Module module;
};

LLVMModule::LLVMModule(const ir::LoweredFunc &f, const LLVMBuildOptions &options)
    : LLVMModule(std::vector<ir::LoweredFunc>{f}, options) {}

LLVMModule::LLVMModule(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options)
    : impl_(std::make_unique<Impl>()) {
  const LLVMTarget target = LLVMTarget::parse(options.target);
  if (!target.runs_on_host()) {
    throw UserError("LLVM back end: code for target \"" + target.str +
                    "\" cannot run on this host; export an object file or a library instead");
  }
  impl_->compiled = compile(funcs, options, Stop::Object);
  const auto t = Clock::now();
  auto jit = std::make_shared<LLVMJit>();
  try {
    jit->add_object_file(impl_->compiled.object, "kiln_module.o");
    const uint64_t info = jit->lookup(KILN_MODULE_INFO_SYMBOL);
    impl_->module = deploy::Module::from_info(reinterpret_cast<const KilnModuleInfo *>(static_cast<uintptr_t>(info)),
                                              std::move(jit));
  } catch (const LLVMJitError &e) {
    throw InternalError(std::string("LLVM back end: the JIT rejected the compiled module: ") + e.what());
  }
  impl_->compiled.times.link_ms = ms_since(t);
  impl_->compiled.object.clear();
  impl_->compiled.object.shrink_to_fit();
}

LLVMModule::~LLVMModule() = default;

const deploy::Module &LLVMModule::module() const { return impl_->module; }

KilnPackedFunc LLVMModule::function(const std::string &name) const { return impl_->module.get_function(name); }

void LLVMModule::call(const std::string &name, const std::vector<deploy::Tensor> &args) const {
  impl_->module.call(name, args);
}

int32_t LLVMModule::call_status(const std::string &name, const std::vector<deploy::Tensor> &args) const {
  return impl_->module.call_status(name, args);
}

std::string LLVMModule::last_error() const { return impl_->module.last_error(); }
const LLVMTarget &LLVMModule::target() const { return impl_->compiled.target; }
const LLVMCompileTimes &LLVMModule::times() const { return impl_->compiled.times; }
const std::string &LLVMModule::llvm_ir() const { return impl_->compiled.llvm_ir; }
const std::string &LLVMModule::assembly() const { return impl_->compiled.assembly; }

LLVMCompileTimes export_object(const std::vector<ir::LoweredFunc> &funcs, const std::string &path,
                               const LLVMBuildOptions &options) {
  Compiled c = compile(funcs, options, Stop::Object);
  const auto t = Clock::now();
  write_file(path, c.object);
  c.times.link_ms = ms_since(t);
  return c.times;
}

LLVMCompileTimes export_library(const std::vector<ir::LoweredFunc> &funcs, const std::string &path,
                                const LLVMBuildOptions &options, const std::string &cc) {
  Compiled c = compile(funcs, options, Stop::Object);
  const auto t = Clock::now();
  TempDir dir;
  const std::string object = dir.path() + "/kiln_module.o";
  const std::string log = dir.path() + "/link.log";
  write_file(object, c.object);
  const ToolRun run = run_system_tool({cc, "-shared", "-o", path, object, "-lm"}, log);
  if (run.status != 0) {
    throw UserError(detail::concat("LLVM back end: linking ", path, " with ", cc, " failed (status ", run.status,
                                   "):\n", run.output));
  }
  c.times.link_ms = ms_since(t);
  return c.times;
}

std::string emit_llvm_ir(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options, bool optimized) {
  return compile(funcs, options, optimized ? Stop::AfterOptimize : Stop::BeforeOptimize).llvm_ir;
}

std::string emit_assembly(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options) {
  LLVMBuildOptions o = options;
  o.keep_assembly = true;
  return compile(funcs, o, Stop::Object).assembly;
}

}  // namespace kiln::codegen
