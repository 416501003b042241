#include "compiler/codegen/c/c_module.h"

#include "compiler/codegen/common/system_tool.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/codegen/c/codegen_c.h"

namespace kiln::codegen {

namespace {}  // namespace

CModule::CModule(const ir::LoweredFunc &f, const std::string &compiler) : name_(f.name), source_(codegen_c(f)) {
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln_c_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw UserError("C back end: cannot create a temporary directory in " + pattern);
  dir_ = pattern;
  try {
    const std::string src = dir_ + "/src.c";
    const std::string lib = dir_ + "/lib.so";
    const std::string log = dir_ + "/cc.log";
    {
      std::ofstream out(src);
      out << source_;
      if (!out) throw UserError("C back end: cannot write " + src);
    }
    const ToolRun run =
        run_system_tool({compiler, "-O2", "-std=c99", "-fwrapv", "-shared", "-fPIC", "-o", lib, src, "-lm"}, log);
    if (run.status != 0) {
      throw UserError(detail::concat("C back end: compiling function ", f.name, " with ", compiler, " failed (status ",
                                     run.status, "):\n", run.output));
    }
    try {
      module_ = deploy::Module::load(lib);
    } catch (const deploy::ModuleError &e) {
      throw UserError(std::string("C back end: cannot load the compiled library: ") + e.what());
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

CModule::~CModule() { cleanup(); }

void CModule::cleanup() noexcept {
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

int32_t CModule::call(const std::vector<deploy::Tensor> &args) const { return module_.call_status(name_, args); }

std::string CModule::last_error() const { return module_.last_error(); }

}  // namespace kiln::codegen
