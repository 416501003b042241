#pragma once
// Target: where a measurement ran. The canonical target string says what code was generated
// (`llvm -mcpu=znver4`); the device key names the class of identical devices it ran on
// (`x86-znver4`). A best-config lookup prefers the exact target string and falls back to other
// targets of the same device class, never to another class.
#include <string>
#include <string_view>

namespace kiln::db {

// contracts::canonical_target (contracts/target.h), with a malformed target reported as
// TuningDbError (kBadInput).
std::string canonical_target(std::string_view target);

struct Target {
  std::string target;      // canonical target string
  std::string device_key;  // device class, e.g. "x86-znver4" or "cuda-sm90-h100"
  std::string model;       // model/arch, e.g. "znver4"; informational

  // Canonicalises the target string and checks the device key (contracts::check_device_key). When
  // `model` is empty it is contracts::target_model of the target.
  static Target make(std::string_view target, std::string device_key, std::string model = {});
};

}  // namespace kiln::db
