#pragma once
// Workload: one tunable operator instance, identified by a content hash that is the same on
// every platform, so the tuner, the runners, the database and the compiler's replay agree on it.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kiln::db {

// The canonical JSON text of `value` (contracts/json.h): object keys sorted (byte order), no
// whitespace, strings in UTF-8 with only the escapes JSON requires, integers without a decimal
// point and floating-point numbers in their shortest round-trip form (1.0 stays "1.0", so 1 and 1.0
// differ). Throws TuningDbError (kBadInput) for a string that is not valid UTF-8.
std::string canonical_json(const nlohmann::json &value);

struct Workload {
  std::string template_name;  // the operator template, e.g. "conv2d_nchw.x86"
  std::string args;           // canonical JSON of its arguments (shapes, dtypes, attributes)
  double flop = 0;            // floating-point operations of one run; 0 when unknown
  std::string key;            // workload_key(template_name, args)

  // Checks the flop count (finite, >= 0) and builds the workload with contracts::Workload (name
  // checked, arguments canonicalised, key computed). Throws TuningDbError (kBadInput).
  static Workload make(std::string template_name, const nlohmann::json &args, double flop = 0);
  // As make(), with the arguments given as JSON text.
  static Workload parse(std::string template_name, std::string_view args_json, double flop = 0);
};

}  // namespace kiln::db
