#include "contracts/workload.h"

#include <utility>

#include "contracts/sha256.h"

namespace kiln::contracts {

std::string workload_key(std::string_view template_name, std::string_view canonical_args) {
  std::string text;
  text.reserve(template_name.size() + 1 + canonical_args.size());
  text.append(template_name).push_back('\n');
  text.append(canonical_args);
  return sha256_hex(text);
}

Workload Workload::make(std::string template_name, Json args) {
  if (template_name.empty()) throw WorkloadError("workload template name is empty");
  if (template_name.find_first_of("\r\n") != std::string::npos) {
    throw WorkloadError("workload template name \"" + template_name + "\" contains a line break");
  }
  Workload w;
  try {
    w.args_json = args.dump();
  } catch (const JsonError &e) {
    throw WorkloadError("workload " + template_name + ": " + e.what());
  }
  w.key = workload_key(template_name, w.args_json);
  w.template_name = std::move(template_name);
  w.args = std::move(args);
  return w;
}

Workload Workload::parse(std::string template_name, std::string_view args_text) {
  Json args;
  try {
    args = Json::parse(args_text);
  } catch (const JsonError &e) {
    throw WorkloadError("workload " + template_name + ": arguments are not valid JSON: " + e.what());
  }
  return make(std::move(template_name), std::move(args));
}

}  // namespace kiln::contracts
