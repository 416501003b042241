#include "db/workload.h"

#include "contracts/workload.h"
#include "db/error.h"

#include <cmath>

namespace kiln::db {

std::string canonical_json(const nlohmann::json &value) {
  try {
    return contracts::Json::parse(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict)).dump();
  } catch (const nlohmann::json::exception &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, std::string("cannot canonicalise JSON: ") + e.what());
  } catch (const contracts::JsonError &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, std::string("cannot canonicalise JSON: ") + e.what());
  }
}

Workload Workload::make(std::string template_name, const nlohmann::json &args, double flop) {
  if (!std::isfinite(flop) || flop < 0) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        "workload " + template_name + ": flop count must be finite and >= 0");
  }
  if (args.is_discarded()) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, "workload " + template_name + ": arguments are not JSON");
  }
  return parse(std::move(template_name), canonical_json(args), flop);
}

Workload Workload::parse(std::string template_name, std::string_view args_json, double flop) {
  if (!std::isfinite(flop) || flop < 0) {
    throw TuningDbError(TuningDbError::Kind::kBadInput,
                        "workload " + template_name + ": flop count must be finite and >= 0");
  }
  contracts::Workload w;
  try {
    w = contracts::Workload::parse(std::move(template_name), args_json);
  } catch (const contracts::WorkloadError &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, e.what());
  }
  Workload out;
  out.template_name = std::move(w.template_name);
  out.args = std::move(w.args_json);
  out.key = std::move(w.key);
  out.flop = flop;
  return out;
}

}  // namespace kiln::db
