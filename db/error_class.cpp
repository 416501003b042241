#include "db/error_class.h"

#include <array>

namespace kiln::db {

namespace {

constexpr std::array<std::string_view, kErrorClassCount> kNames = {
    "OK",           "INSTANTIATION", "COMPILE_HOST", "COMPILE_DEVICE", "RUNTIME_DEVICE",
    "WRONG_ANSWER", "BUILD_TIMEOUT", "RUN_TIMEOUT",  "UNKNOWN",        "INFRA",
};

}  // namespace

std::string_view to_string(ErrorClass error) {
  int code = static_cast<int>(error);
  return code >= 0 && code < kErrorClassCount ? kNames[code] : std::string_view("UNKNOWN");
}

std::optional<ErrorClass> parse_error_class(std::string_view name) {
  for (int code = 0; code < kErrorClassCount; ++code) {
    if (kNames[code] == name) return static_cast<ErrorClass>(code);
  }
  return std::nullopt;
}

std::optional<ErrorClass> error_class_from_code(int code) {
  if (code < 0 || code >= kErrorClassCount) return std::nullopt;
  return static_cast<ErrorClass>(code);
}

int autotvm_error_no(ErrorClass error) {
  return error == ErrorClass::kInfra ? static_cast<int>(ErrorClass::kUnknown) : static_cast<int>(error);
}

}  // namespace kiln::db
