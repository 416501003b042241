#pragma once
// ErrorClass: why a measurement failed, or kOk. The names are shared with the measurement farm;
// the numeric codes are stored in the database and must never be renumbered. Codes 0..7 are the
// ones AutoTVM's MeasureErrorNo uses for the same failures.
#include <optional>
#include <string_view>

namespace kiln::db {

enum class ErrorClass : int {
  kOk = 0,
  kInstantiation = 1,  // the config is not valid for the template (an illegal schedule)
  kCompileHost = 2,    // host code failed to compile
  kCompileDevice = 3,  // device code failed to compile
  kRuntimeDevice = 4,  // the kernel failed while running
  kWrongAnswer = 5,    // the kernel ran but its output was wrong
  kBuildTimeout = 6,   // compiling took longer than allowed
  kRunTimeout = 7,     // running took longer than allowed
  kUnknown = 8,        // a failure that fits no other class
  kInfra = 9,          // the farm failed (runner lost, RPC error); not the config's fault
};

constexpr int kErrorClassCount = 10;

// "OK", "INSTANTIATION", "COMPILE_HOST", "COMPILE_DEVICE", "RUNTIME_DEVICE", "WRONG_ANSWER",
// "BUILD_TIMEOUT", "RUN_TIMEOUT", "UNKNOWN", "INFRA".
std::string_view to_string(ErrorClass error);
// The class named `name` (exactly as to_string spells it), or nullopt.
std::optional<ErrorClass> parse_error_class(std::string_view name);
// The class stored as `code`, or nullopt for a code no Kiln uses.
std::optional<ErrorClass> error_class_from_code(int code);
// AutoTVM's MeasureErrorNo for this class (INFRA has none there and maps to UNKNOWN_ERROR, 8).
int autotvm_error_no(ErrorClass error);

}  // namespace kiln::db
