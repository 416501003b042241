#include "db/workload.h"

#include "db/error.h"
#include "contracts/workload.h"

#include <cmath>

namespace kiln::db {

std::string canonical_json(const nlohmann::json &value) {
  // nlohmann::json keeps objects in a std::map, so keys come out sorted by byte order; numbers
  // are printed with its own shortest round-trip algorithm, which does not depend on the locale
  // or the C library.
  try {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        std::string("cannot canonicalise JSON: ") + e.what());
  }
}

std::string workload_key(std::string_view template_name, std::string_view canonical_args) {
  return contracts::workload_key(template_name, canonical_args);
}

Workload Workload::make(std::string template_name, const nlohmann::json &args, double flop) {
  if (template_name.empty()) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, "workload template name is empty");
  }
  if (template_name.find_first_of("\r\n") != std::string::npos) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        "workload template name \"" + template_name + "\" contains a line break");
  }
  if (!std::isfinite(flop) || flop < 0) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        "workload " + template_name + ": flop count must be finite and >= 0");
  }
  if (args.is_discarded()) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        "workload " + template_name + ": arguments are not JSON");
  }
  Workload w;
  w.args = canonical_json(args);
  w.key = workload_key(template_name, w.args);
  w.template_name = std::move(template_name);
  w.flop = flop;
  return w;
}

Workload Workload::parse(std::string template_name, std::string_view args_json, double flop) {
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(args_json);
  } catch (const nlohmann::json::exception &e) {
    throw TuningDbError(
        TuningDbError::Kind::kBadInput,
        "workload " + template_name + ": arguments are not valid JSON: " + e.what());
  }
  return make(std::move(template_name), args, flop);
}

}  // namespace kiln::db
