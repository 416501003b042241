#pragma once
// Workload: one tunable operator instance, an operator template name plus its canonical arguments
// (canonical JSON, contracts/json.h). Its key is the same on every platform, so the tuner, the
// runners, the tuning log and the compiler's replay agree on it. Every component builds workloads
// and keys here.
#include <string>
#include <string_view>

#include "contracts/json.h"

namespace kiln::contracts {

// Lower-case hex SHA-256 of `template_name + '\n' + canonical_args`.
std::string workload_key(std::string_view template_name, std::string_view canonical_args);

// A workload that cannot be: an empty or multi-line template name, arguments that are not JSON.
class WorkloadError : public UserError {
 public:
  using UserError::UserError;
};

struct Workload {
  std::string template_name;  // e.g. "conv2d_nchwc.x86"
  Json args;                  // the arguments (an operator template's canonical form of them)
  std::string args_json;      // args.dump(): the canonical text
  std::string key;            // workload_key(template_name, args_json)

  // Checks the name (non-empty, no line break) and computes the canonical text and the key.
  // Throws WorkloadError.
  static Workload make(std::string template_name, Json args);
  // As make(), with the arguments as JSON text in any spelling.
  static Workload parse(std::string template_name, std::string_view args_text);
};

}  // namespace kiln::contracts
