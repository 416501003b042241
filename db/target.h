#pragma once
// Target: where a measurement ran. The canonical target string says what code was generated
// (`llvm -mcpu=znver4`); the device key names the class of identical devices it ran on
// (`x86-znver4`). A best-config lookup prefers the exact target string and falls back to other
// targets of the same device class, never to another class.
#include <string>
#include <string_view>

namespace kiln::db {

// The canonical form of a target string: the kind first, then its options sorted by name, each
// written `-name=value` (or `-name` for a flag), separated by one space. `--name` is accepted for
// `-name`. Throws TuningDbError (kBadInput) for an empty string, a kind that starts with '-', a
// token that is not an option, or an option given twice.
std::string canonical_target(std::string_view target);

struct Target {
  std::string target;      // canonical target string
  std::string device_key;  // device class, e.g. "x86-znver4" or "cuda-sm90-h100"
  std::string model;       // model/arch, e.g. "znver4"; informational

  // Canonicalises the target string and checks the device key (non-empty, no whitespace). When
  // `model` is empty it is taken from the -model, -mcpu or -arch option, in that order.
  static Target make(std::string_view target, std::string device_key, std::string model = {});
};

}  // namespace kiln::db
