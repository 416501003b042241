#include "compiler/ops/target.h"

#include "compiler/codegen/llvm/llvm_target.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "compiler/ir/error.h"

namespace kiln::ops {

namespace {

// CPUs (LLVM -mcpu names) with AVX-512F, and with AVX2 but not AVX-512.
const std::set<std::string> &avx512_cpus() {
  static const std::set<std::string> s = {"skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
                                          "icelake-client", "icelake-server", "tigerlake", "sapphirerapids",
                                          "rocketlake", "graniterapids", "emeraldrapids", "znver4",
                                          "znver5", "knl", "knm", "x86-64-v4"};
  return s;
}

const std::set<std::string> &avx2_cpus() {
  static const std::set<std::string> s = {"haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
                                          "znver1", "znver2", "znver3", "x86-64-v3", "core-avx2", "bdver4"};
  return s;
}

}  // namespace

int Target::lanes(const ir::DataType &t) const { return std::max(1, vector_bits / std::max(1, t.bits())); }

Target Target::parse(const std::string &text) {
  Target t;
  t.text = text;
  std::istringstream in(text);
  std::string tok;
  if (!(in >> t.kind)) throw UserError("empty target string");
  if (t.kind[0] == '-') throw UserError("target string '" + text + "' must start with its kind (llvm, c, cuda, ...)");
  while (in >> tok) {
    if (tok.size() < 2 || tok[0] != '-') throw UserError("target string '" + text + "': '" + tok + "' is not an option");
    std::string opt = tok.substr(tok[1] == '-' ? 2 : 1);
    std::string name = opt, value;
    if (auto eq = opt.find('='); eq != std::string::npos) {
      name = opt.substr(0, eq);
      value = opt.substr(eq + 1);
    }
    if (name == "mcpu") {
      t.mcpu = value;
    } else if (name == "mattr") {
      std::istringstream attrs(value);
      std::string a;
      while (std::getline(attrs, a, ',')) {
        if (!a.empty()) t.mattr.push_back(a);
      }
    }
  }
  auto has_attr = [&](const std::string &a) {
    return std::find(t.mattr.begin(), t.mattr.end(), "+" + a) != t.mattr.end();
  };
  if (avx512_cpus().count(t.mcpu) || has_attr("avx512f")) {
    t.vector_bits = 512;
  } else if (avx2_cpus().count(t.mcpu) || has_attr("avx2")) {
    t.vector_bits = 256;
  }
  if (t.kind == "llvm") {
    // The LLVM back end knows every CPU it can compile for, "-mcpu=native" included (resolved
    // to the host's CPU and features), so its answer decides what it will actually generate.
    int bits = codegen::LLVMTarget::parse(text).vector_bits();
    if (bits > 0) t.vector_bits = bits;
  }
  return t;
}

}  // namespace kiln::ops
