#include "compiler/codegen/c/c_module.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/codegen/c/codegen_c.h"

namespace kiln::codegen {

namespace {

// One shell word.
std::string shell_quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

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
    const std::string cmd = shell_quote(compiler) + " -O2 -std=c99 -fwrapv -shared -fPIC -o " + shell_quote(lib) +
                            " " + shell_quote(src) + " -lm > " + shell_quote(log) + " 2>&1";
    const int status = std::system(cmd.c_str());
    if (status != 0) {
      throw UserError(detail::concat("C back end: compiling function ", f.name, " with ", compiler,
                                     " failed (status ", status, "):\n", read_file(log)));
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
