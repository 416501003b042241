#pragma once
// ConfigRecord: one point of a template's config space as every component exchanges it (the
// tuner, the tuning log, the wire form, the runners): its index in the space, the space
// fingerprint, and one value per knob in knob order. The knobs have one canonical text, the JSON
// array [["knob", value], ...] in canonical JSON (contracts/json.h), which the tuning log stores
// and the wire carries. A config space (autotune::ConfigSpace) checks a record against itself.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "contracts/json.h"

namespace kiln::contracts {

// A config record that cannot be: a negative index, knobs that are not JSON, not a list of
// [knob, value] pairs or an object, an empty or repeated knob name.
class ConfigRecordError : public UserError {
 public:
  using UserError::UserError;
};

using KnobValue = std::pair<std::string, Json>;

struct ConfigRecord {
  int64_t index = 0;             // the config's mixed-radix index in its space, >= 0
  std::string space;             // the fingerprint of the config space
  std::vector<KnobValue> knobs;  // (knob, value), in knob order

  // Checks the index and the knob names. Throws ConfigRecordError.
  static ConfigRecord make(int64_t index, std::string space, std::vector<KnobValue> knobs);
  // As make(), with the knobs as text (parse_knobs).
  static ConfigRecord parse(int64_t index, std::string space, std::string_view knobs_text);

  // The knobs as the canonical text [["knob",value],...].
  std::string knobs_json() const;
  // The knobs as a Json array of [knob, value] pairs.
  Json knobs_value() const;

  bool operator==(const ConfigRecord &o) const { return index == o.index && space == o.space && knobs == o.knobs; }
  bool operator!=(const ConfigRecord &o) const { return !(*this == o); }
};

// Knobs from JSON text in either form: the list [["knob", value], ...] (in knob order), or the
// object {"knob": value, ...} (its knobs in name order). Throws ConfigRecordError saying what is
// wrong.
std::vector<KnobValue> parse_knobs(std::string_view text);
// As parse_knobs, from a parsed value.
std::vector<KnobValue> knobs_from_value(const Json &knobs);

}  // namespace kiln::contracts
