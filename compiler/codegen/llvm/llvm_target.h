#pragma once
// LLVMTarget: a CPU target given as a string, as in the tuning log and on the command line:
//   llvm                                    the host's triple, a generic CPU of its architecture
//   llvm -mcpu=native                       the host CPU with every feature it has
//   llvm -mcpu=znver4                       a named CPU (the host's triple unless -mtriple is given)
//   llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma
// LLVM's headers stay out of this one; create_target_machine() is for the back end's own files.
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

struct LLVMTarget {
  std::string str;                    // the canonical target string (contracts/target.h)
  std::string triple;                 // e.g. "x86_64-pc-linux-gnu"
  std::string cpu;                    // an LLVM CPU name, e.g. "znver3", "x86-64"
  std::vector<std::string> features;  // "+avx512f", "-avx512f", ... (beyond the CPU's own)

  // Parses a target string (the grammar of contracts/target.h; options -mtriple, -mcpu, -mattr);
  // throws UserError naming the bad part. "-mcpu=native" resolves to
  // the host CPU and features now. A CPU newer than this LLVM knows (znver4) becomes the newest
  // CPU of its family that it does know plus the new CPU's features.
  static LLVMTarget parse(const std::string &target);
  static LLVMTarget host();  // "llvm -mcpu=native"

  // Whether code for this target runs on the host: same architecture, and every feature the
  // target's CPU and features enable is one the host CPU has.
  bool runs_on_host() const;
  // Whether the target's CPU, with its features, has `feature` (an LLVM name: "avx512f", "fma").
  bool has_feature(const std::string &feature) const;
  // The width in bits of the widest SIMD registers for floating point: 512 with AVX-512, 256 with
  // AVX, 128 with SSE or NEON, 0 if none is known.
  int vector_bits() const;
  // The features joined as LLVM wants them: "+avx2,+fma".
  std::string feature_string() const;
};

// LLVM's name of this host's CPU ("sapphirerapids", "znver3"), or of the newer CPU the host is
// when LLVM names it by an older one and the host has every feature of the newer (znver4).
std::string host_cpu_name();

// The target `target` names on this host: for "llvm -mcpu=native", "llvm -mcpu=<host_cpu_name()>"
// with -mattr naming where the host's features differ from that CPU's (a virtual machine may hide
// some) before the target's own -mattr; any other target unchanged. Canonical (contracts/target.h).
// Throws UserError as parse() does.
std::string resolve_native(const std::string &target);

// A TargetMachine for `target` (PIC, optimisation level from 0 to 3). Throws UserError when this
// LLVM does not support the triple.
std::unique_ptr<llvm::TargetMachine> create_target_machine(const LLVMTarget &target, int opt_level = 3);

// Registers LLVM's targets once per process (thread-safe).
void initialize_llvm_targets();

}  // namespace kiln::codegen
