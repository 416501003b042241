#include "contracts/workload.h"

#include "contracts/sha256.h"

namespace kiln::contracts {

std::string workload_key(std::string_view template_name, std::string_view canonical_args) {
  std::string text;
  text.reserve(template_name.size() + 1 + canonical_args.size());
  text.append(template_name).push_back('\n');
  text.append(canonical_args);
  return sha256_hex(text);
}

}  // namespace kiln::contracts
