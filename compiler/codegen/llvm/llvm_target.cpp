#include "compiler/codegen/llvm/llvm_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/Triple.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <sstream>

#include "compiler/ir/error.h"
#include "contracts/target.h"

namespace kiln::codegen {

namespace {

// CPUs newer than LLVM 14: the newest CPU of the family it knows, plus the features it adds.
struct NewerCpu {
  const char *name;
  const char *known;
  std::vector<const char *> features;
};

const std::vector<NewerCpu> &newer_cpus() {
  static const std::vector<NewerCpu> cpus = {
      {"znver4",
       "znver3",
       {"+avx512f", "+avx512cd", "+avx512bw", "+avx512dq", "+avx512vl", "+avx512ifma", "+avx512vbmi", "+avx512vbmi2",
        "+avx512vnni", "+avx512bitalg", "+avx512vpopcntdq", "+avx512bf16", "+gfni", "+vaes", "+vpclmulqdq"}},
  };
  return cpus;
}

std::vector<std::string> split_features(const std::string &s, const std::string &target) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string f;
  while (std::getline(ss, f, ',')) {
    if (f.empty()) continue;
    if (f[0] != '+' && f[0] != '-') {
      throw UserError("target \"" + target + "\": feature " + f + " in -mattr must start with + or -");
    }
    out.push_back(f);
  }
  return out;
}

std::vector<std::string> host_features() {
  std::vector<std::string> out;
  llvm::StringMap<bool> features;
  if (llvm::sys::getHostCPUFeatures(features)) {
    for (const auto &kv : features) out.push_back((kv.getValue() ? "+" : "-") + kv.getKey().str());
    std::sort(out.begin(), out.end());
  }
  return out;
}

const llvm::Target *lookup(const std::string &triple, const std::string &what) {
  initialize_llvm_targets();
  std::string error;
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) throw UserError("target \"" + what + "\": LLVM does not support triple " + triple + ": " + error);
  return t;
}

std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const LLVMTarget &t) {
  const llvm::Target *target = lookup(t.triple, t.str);
  return std::unique_ptr<llvm::MCSubtargetInfo>(target->createMCSubtargetInfo(t.triple, t.cpu, t.feature_string()));
}

const std::vector<std::string> &cached_host_features() {
  static const std::vector<std::string> features = host_features();
  return features;
}

// The features of `host` (+f or -f each) that the subtarget `named` has otherwise.
std::vector<std::string> differing_features(const llvm::MCSubtargetInfo &named, const std::vector<std::string> &host) {
  std::vector<std::string> out;
  for (const std::string &f : host) {
    if ((f[0] == '+') != named.checkFeatures("+" + f.substr(1))) out.push_back(f);
  }
  return out;
}

// For a host CPU that LLVM does not know (it names it "generic": a CPU newer than LLVM 14, such as
// AMD's Zen 5): the named x86 CPU of the host's vendor (AMD's or Intel's; the x86-64 levels for
// any) whose features differ least from the host's, so that the scheduling model is the nearest
// one LLVM has and the target lists few features of its own (all of them, against "generic": over
// 500 bytes). "generic" where none is closer.
std::string closest_named_cpu(const std::vector<std::string> &host) {
  std::vector<const char *> candidates = {"generic", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
#if defined(__x86_64__)
  if (__builtin_cpu_is("amd")) {
    candidates.insert(candidates.end(), {"btver2", "bdver4", "znver1", "znver2", "znver3", "znver4"});
  } else if (__builtin_cpu_is("intel")) {
    candidates.insert(candidates.end(),
                      {"nehalem", "sandybridge", "haswell", "broadwell", "skylake", "skylake-avx512", "cascadelake",
                       "icelake-client", "icelake-server", "tigerlake", "sapphirerapids", "alderlake"});
  }
#endif
  if (llvm::Triple(llvm::sys::getProcessTriple()).getArch() != llvm::Triple::x86_64) return "generic";
  std::string best = "generic";
  size_t best_diff = SIZE_MAX;
  for (const char *c : candidates) {
    std::unique_ptr<llvm::MCSubtargetInfo> named;
    try {
      named = subtarget(LLVMTarget::parse(std::string("llvm -mcpu=") + c));
    } catch (const UserError &) {
      continue;  // not a CPU of this LLVM
    }
    const size_t diff = differing_features(*named, host).size();
    if (diff < best_diff) {
      best = c;
      best_diff = diff;
    }
  }
  return best;
}

}  // namespace

std::string host_cpu_name() {
  static const std::string name = [] {
    const std::string cpu = llvm::sys::getHostCPUName().str();
    const std::vector<std::string> &host = cached_host_features();
    if (cpu == "generic") return closest_named_cpu(host);
    for (const auto &n : newer_cpus()) {
      if (cpu != n.known) continue;
      const bool has_all = std::all_of(n.features.begin(), n.features.end(), [&](const char *f) {
        return std::find(host.begin(), host.end(), std::string(f)) != host.end();
      });
      if (has_all) return std::string(n.name);
    }
    return cpu;
  }();
  return name;
}

std::string resolve_native(const std::string &target) {
  contracts::Target parsed = [&] {
    try {
      return contracts::Target::parse(target);
    } catch (const contracts::TargetError &e) {
      throw UserError(e.what());
    }
  }();
  if (parsed.kind() != "llvm" || parsed.value("mcpu") != std::optional<std::string>("native")) return parsed.str();
  LLVMTarget::parse(parsed.str());  // refuses a -mtriple of another architecture
  std::string named_text = "llvm -mcpu=" + host_cpu_name();
  if (auto triple = parsed.value("mtriple")) named_text += " -mtriple=" + *triple;
  auto named = subtarget(LLVMTarget::parse(named_text));
  // Where the host's features differ from the named CPU's, the host's.
  std::vector<std::string> attrs = differing_features(*named, cached_host_features());
  if (auto own = parsed.value("mattr")) attrs.push_back(*own);
  std::string text = named_text;
  if (!attrs.empty()) {
    std::string joined;
    for (const std::string &a : attrs) joined += (joined.empty() ? "" : ",") + a;
    text += " -mattr=" + joined;
  }
  return contracts::canonical_target(text);
}

void initialize_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

LLVMTarget LLVMTarget::parse(const std::string &target) {
  contracts::Target parsed = [&] {
    try {
      return contracts::Target::parse(target);
    } catch (const contracts::TargetError &e) {
      throw UserError(e.what());
    }
  }();
  if (parsed.kind() != "llvm") {
    throw UserError("target \"" + target + "\": an LLVM CPU target starts with \"llvm\"");
  }
  for (const contracts::TargetOption &o : parsed.options()) {
    if (o.name != "mtriple" && o.name != "mcpu" && o.name != "mattr") {
      throw UserError("target \"" + target + "\": unknown option -" + o.name + " (known: -mtriple=, -mcpu=, -mattr=)");
    }
    if (!o.value || o.value->empty()) throw UserError("target \"" + target + "\": -" + o.name + " needs a value");
  }
  const bool have_triple = parsed.has("mtriple");
  const std::string triple = parsed.value("mtriple").value_or("");
  const std::string cpu = parsed.value("mcpu").value_or("");
  const std::string attrs = parsed.value("mattr").value_or("");
  LLVMTarget t;
  t.str = parsed.str();

  const std::string host_triple = llvm::sys::getProcessTriple();
  t.triple = llvm::Triple::normalize(have_triple ? triple : host_triple);
  const llvm::Triple tt(t.triple);
  if (cpu == "native") {
    if (have_triple && tt.getArch() != llvm::Triple(host_triple).getArch()) {
      throw UserError("target \"" + target + "\": -mcpu=native describes the host, whose triple is " + host_triple);
    }
    t.cpu = llvm::sys::getHostCPUName().str();
    // A CPU LLVM does not know: the scheduling model of the nearest one it knows (its features are
    // the host's all the same).
    if (t.cpu == "generic") t.cpu = parse("llvm -mcpu=" + host_cpu_name()).cpu;
    t.features = host_features();
  } else if (!cpu.empty()) {
    t.cpu = cpu;
  } else {
    t.cpu = tt.getArch() == llvm::Triple::x86_64 ? "x86-64" : "generic";
  }
  const llvm::Target *llvm_target = lookup(t.triple, target);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(llvm_target->createMCSubtargetInfo(t.triple, "", ""));
  if (cpu != "native" && !cpu.empty() && !sti->isCPUStringValid(t.cpu)) {
    bool mapped = false;
    for (const auto &n : newer_cpus()) {
      if (t.cpu == n.name && sti->isCPUStringValid(n.known)) {
        t.cpu = n.known;
        t.features.insert(t.features.end(), n.features.begin(), n.features.end());
        mapped = true;
      }
    }
    if (!mapped) throw UserError("target \"" + target + "\": LLVM does not know the CPU " + cpu);
  }
  for (auto &f : split_features(attrs, target)) t.features.push_back(f);
  return t;
}

LLVMTarget LLVMTarget::host() { return parse("llvm -mcpu=native"); }

std::string LLVMTarget::feature_string() const {
  std::string s;
  for (const auto &f : features) s += (s.empty() ? "" : ",") + f;
  return s;
}

bool LLVMTarget::has_feature(const std::string &feature) const {
  return subtarget(*this)->checkFeatures("+" + feature);
}

bool LLVMTarget::runs_on_host() const {
  static const LLVMTarget native = host();
  if (llvm::Triple(triple).getArch() != llvm::Triple(native.triple).getArch()) return false;
  if (llvm::Triple(triple).getOS() != llvm::Triple(native.triple).getOS()) return false;
  // Tuning flags differ from CPU to CPU; what matters is that no instruction set the host lacks
  // is enabled.
  auto sti = subtarget(*this);
  for (const auto &f : native.features) {
    if (f[0] == '-' && sti->checkFeatures("+" + f.substr(1))) return false;
  }
  return true;
}

int LLVMTarget::vector_bits() const {
  auto sti = subtarget(*this);
  const llvm::Triple tt(triple);
  if (tt.isX86()) {
    if (sti->checkFeatures("+avx512f")) return 512;
    if (sti->checkFeatures("+avx")) return 256;
    if (sti->checkFeatures("+sse2")) return 128;
    return 0;
  }
  if (tt.isAArch64() || tt.isARM()) return sti->checkFeatures("+neon") ? 128 : 0;
  return 0;
}

std::unique_ptr<llvm::TargetMachine> create_target_machine(const LLVMTarget &target, int opt_level) {
  const llvm::Target *t = lookup(target.triple, target.str);
  llvm::TargetOptions options;
  llvm::CodeGenOpt::Level level = llvm::CodeGenOpt::Aggressive;
  if (opt_level <= 0)
    level = llvm::CodeGenOpt::None;
  else if (opt_level == 1)
    level = llvm::CodeGenOpt::Less;
  else if (opt_level == 2)
    level = llvm::CodeGenOpt::Default;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(target.triple, target.cpu, target.feature_string(),
                                                                 options, llvm::Reloc::PIC_, llvm::None, level));
  if (!tm) throw UserError("target \"" + target.str + "\": LLVM cannot create a target machine");
  return tm;
}

}  // namespace kiln::codegen
