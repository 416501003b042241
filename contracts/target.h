#pragma once
// Target strings and device keys: the one grammar every component parses and prints.
//
// A target string is a kind followed by options, separated by whitespace:
//   llvm -mcpu=znver4 -mattr=+avx512f
//   cuda -arch=sm_90
// Each option is `-name` (a flag) or `-name=value`; `--name` is accepted for `-name`. A name is
// given at most once. The canonical form is the kind, then the options sorted by name, each written
// `-name` or `-name=value`, separated by one space; two strings name the same target exactly when
// their canonical forms are equal. What the options mean is the back end's business: this grammar
// keeps them as given.
//
// A device key names a class of identical devices in the farm (`x86-znver4`, `cuda-sm90-h100`).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contracts/error.h"

namespace kiln::contracts {

// A target string or device key that does not follow the grammar. The message quotes it.
class TargetError : public UserError {
 public:
  using UserError::UserError;
};

struct TargetOption {
  std::string name;                  // without the leading dashes
  std::optional<std::string> value;  // nullopt for a flag

  bool operator==(const TargetOption &o) const { return name == o.name && value == o.value; }
};

class Target {
 public:
  // Parses a target string. Throws TargetError for an empty string, a kind that starts with '-', a
  // word that is not an option, an option without a name, or an option given twice.
  static Target parse(std::string_view text);

  const std::string &kind() const { return kind_; }
  // The options, sorted by name.
  const std::vector<TargetOption> &options() const { return options_; }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  // The option's value; nullopt when the option is absent or is a flag.
  std::optional<std::string> value(std::string_view name) const;
  // nullptr when absent.
  const TargetOption *find(std::string_view name) const;
  // The canonical text.
  const std::string &str() const { return canonical_; }

  bool operator==(const Target &o) const { return canonical_ == o.canonical_; }
  bool operator!=(const Target &o) const { return !(*this == o); }

 private:
  std::string kind_;
  std::vector<TargetOption> options_;
  std::string canonical_;
};

// Target::parse(text).str().
std::string canonical_target(std::string_view text);

// Whether two target strings name the same target. Throws TargetError when either is malformed.
bool same_target(std::string_view a, std::string_view b);

// Checks a device key: 1 to kMaxDeviceKeyBytes bytes, no whitespace or control characters.
// Throws TargetError naming the key and the rule.
constexpr size_t kMaxDeviceKeyBytes = 256;
void check_device_key(std::string_view key);

// The model of the device a target describes, for listings: the value of -model, -mcpu or -arch,
// the first one present; "" when none is.
std::string target_model(const Target &target);

}  // namespace kiln::contracts
