#pragma once
// Workload keys: a workload is an operator template name plus its canonical arguments (canonical
// JSON, contracts/json.h); its key is the same on every platform, so the tuner, the runners, the
// tuning log and the compiler's replay agree on it.
#include <string>
#include <string_view>

namespace kiln::contracts {

// Lower-case hex SHA-256 of `template_name + '\n' + canonical_args`.
std::string workload_key(std::string_view template_name, std::string_view canonical_args);

}  // namespace kiln::contracts
