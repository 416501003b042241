#include "contracts/config.h"

#include <set>

namespace kiln::contracts {

namespace {

void check_names(const std::vector<KnobValue> &knobs) {
  std::set<std::string> seen;
  for (const auto &[name, value] : knobs) {
    (void)value;
    if (name.empty()) throw ConfigRecordError("config knobs: a knob has an empty name");
    if (!seen.insert(name).second) throw ConfigRecordError("config knobs: knob " + name + " is given twice");
  }
}

}  // namespace

std::vector<KnobValue> knobs_from_value(const Json &knobs) {
  std::vector<KnobValue> result;
  if (knobs.is_object()) {
    for (const auto &[name, value] : knobs.as_object()) result.emplace_back(name, value);
  } else if (knobs.is_array()) {
    result.reserve(knobs.size());
    for (const Json &pair : knobs.as_array()) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
        throw ConfigRecordError("config knobs: entry " + pair.dump() + " is not a [\"knob\", value] pair");
      }
      result.emplace_back(pair[0].as_string(), pair[1]);
    }
  } else {
    throw ConfigRecordError(std::string("config knobs must be a list of [\"knob\", value] pairs or an object "
                                        "{\"knob\": value}, got ") +
                            Json::type_name(knobs.type()));
  }
  check_names(result);
  return result;
}

std::vector<KnobValue> parse_knobs(std::string_view text) {
  Json knobs;
  try {
    knobs = Json::parse(text);
  } catch (const JsonError &e) {
    throw ConfigRecordError(std::string("config knobs are not valid JSON: ") + e.what());
  }
  return knobs_from_value(knobs);
}

ConfigRecord ConfigRecord::make(int64_t index, std::string space, std::vector<KnobValue> knobs) {
  if (index < 0) throw ConfigRecordError("config index " + std::to_string(index) + " is negative");
  check_names(knobs);
  ConfigRecord r;
  r.index = index;
  r.space = std::move(space);
  r.knobs = std::move(knobs);
  return r;
}

ConfigRecord ConfigRecord::parse(int64_t index, std::string space, std::string_view knobs_text) {
  return make(index, std::move(space), parse_knobs(knobs_text));
}

Json ConfigRecord::knobs_value() const {
  Json::Array pairs;
  pairs.reserve(knobs.size());
  for (const auto &[name, value] : knobs) pairs.push_back(Json::array({Json(name), value}));
  return Json::array(std::move(pairs));
}

std::string ConfigRecord::knobs_json() const {
  try {
    return knobs_value().dump();
  } catch (const JsonError &e) {
    throw ConfigRecordError(std::string("config knobs: ") + e.what());
  }
}

}  // namespace kiln::contracts
