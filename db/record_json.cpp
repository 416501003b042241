#include "db/record_json.h"

#include "contracts/json.h"
#include "db/error.h"

#include <cmath>

namespace kiln::db {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

[[noreturn]] void bad(const std::string &message) { throw TuningDbError(TuningDbError::Kind::kBadInput, message); }

const json &member(const json &object, const char *name, const char *where) {
  auto it = object.find(name);
  if (it == object.end()) bad(std::string("missing field \"") + where + name + "\"");
  return *it;
}

const json &object_member(const json &object, const char *name) {
  const json &value = member(object, name, "");
  if (!value.is_object()) bad(std::string("field \"") + name + "\" must be an object");
  return value;
}

std::string string_field(const json &object, const char *name, const char *where, bool required = true) {
  auto it = object.find(name);
  if (it == object.end()) {
    if (required) bad(std::string("missing field \"") + where + name + "\"");
    return {};
  }
  if (!it->is_string()) bad(std::string("field \"") + where + name + "\" must be a string");
  return it->get<std::string>();
}

double number_field(const json &object, const char *name, const char *where, bool required, double fallback = 0) {
  auto it = object.find(name);
  if (it == object.end() || (!required && it->is_null())) {
    if (required) bad(std::string("missing field \"") + where + name + "\"");
    return fallback;
  }
  if (!it->is_number()) bad(std::string("field \"") + where + name + "\" must be a number");
  return it->get<double>();
}

// A record read from a log written before insert checked its numbers may hold one JSON cannot
// (nlohmann would write inf and nan as null), or be valid without a cost (its mean would be null).
// Refuses it, naming the record and the field, rather than write a line import would misread.
void check_writable(const Record &record) {
  auto refuse = [&](const std::string &what) {
    throw TuningDbError(TuningDbError::Kind::kCorrupt, "record " + std::to_string(record.id) +
                                                           " cannot be written as JSON: " + what +
                                                           "; `kiln db check` lists such records");
  };
  auto finite = [&](double value, const char *field) {
    if (!std::isfinite(value)) refuse(std::string("field \"") + field + "\" is not a finite number");
  };
  finite(record.workload.flop, "workload.flop");
  for (double cost : record.costs) finite(cost, "result.costs");
  if (record.valid() && record.costs.empty()) refuse("it is valid (OK) but has no costs");
  finite(record.wall_s, "result.wall");
  finite(record.timestamp, "timestamp");
}

}  // namespace

json parse_json(std::string_view text) {
  try {
    contracts::check_json_depth(text);
  } catch (const contracts::JsonError &e) {
    bad(e.what());
  }
  json parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded()) bad("not valid JSON");
  return parsed;
}

ordered_json record_to_json(const Record &record) {
  check_writable(record);
  ordered_json line;
  line["format"] = "kiln-record";
  line["version"] = kRecordFormatVersion;
  line["workload"] = {{"key", record.workload.key},
                      {"template", record.workload.template_name},
                      {"args", ordered_json(parse_json(record.workload.args))},
                      {"flop", record.workload.flop}};
  line["target"] = {
      {"target", record.target.target}, {"device", record.target.device_key}, {"model", record.target.model}};
  line["config"] = {{"index", record.config.index},
                    {"space", record.config.space},
                    {"knobs", ordered_json::parse(record.config.knobs_json())}};
  ordered_json result;
  result["error"] = std::string(to_string(record.error));
  result["message"] = record.error_message;
  result["costs"] = record.costs;
  if (record.valid()) result["mean"] = record.mean();
  result["wall"] = record.wall_s;
  line["result"] = std::move(result);
  line["runner"] = record.runner;
  line["kiln_version"] = record.kiln_version;
  line["timestamp"] = record.timestamp;
  return line;
}

Record record_from_json(const json &line) {
  if (!line.is_object()) bad("a record line must be a JSON object");
  if (line.contains("input") && line.contains("result") && !line.contains("format")) {
    bad("this is an AutoTVM log line; import reads Kiln's JSON-lines format (db/FORMAT.md)");
  }
  if (string_field(line, "format", "") != "kiln-record") {
    bad("field \"format\" must be \"kiln-record\"");
  }
  const json &version = member(line, "version", "");
  if (!version.is_number_integer()) bad("field \"version\" must be an integer");
  if (version.is_number_unsigned() ? version.get<uint64_t>() > kRecordFormatVersion
                                   : version.get<int64_t>() > kRecordFormatVersion) {
    bad("record format version " + version.dump() + " was written by a newer Kiln; this Kiln reads version " +
        std::to_string(kRecordFormatVersion));
  }
  if (version.get<int64_t>() < 1) bad("record format version " + version.dump() + " does not exist");

  Record record;
  const json &workload = object_member(line, "workload");
  record.workload =
      Workload::make(string_field(workload, "template", "workload."), member(workload, "args", "workload."),
                     number_field(workload, "flop", "workload.", false));
  std::string key = string_field(workload, "key", "workload.", false);
  if (!key.empty() && key != record.workload.key) {
    bad("workload key " + key + " does not match its template and arguments (expected " + record.workload.key + ")");
  }

  const json &target = object_member(line, "target");
  record.target = Target::make(string_field(target, "target", "target."), string_field(target, "device", "target."),
                               string_field(target, "model", "target.", false));

  const json &config = object_member(line, "config");
  const json &index = member(config, "index", "config.");
  if (!index.is_number_integer()) bad("field \"config.index\" must be an integer");
  if (index.is_number_unsigned() && index.get<uint64_t>() > static_cast<uint64_t>(kMaxConfigIndex)) {
    bad("field \"config.index\" " + index.dump() + " is out of range (0 .. 2^53)");
  }
  record.config.index = index.get<int64_t>();
  record.config.space = string_field(config, "space", "config.", false);
  const json &knobs = member(config, "knobs", "config.");
  if (!knobs.is_array()) bad("config knobs must be an array of [knob, value] pairs");
  record.config.knobs = knobs_from_text(knobs.dump());

  const json &result = object_member(line, "result");
  std::string error = string_field(result, "error", "result.");
  auto error_class = parse_error_class(error);
  if (!error_class) bad("unknown error class \"" + error + "\" in \"result.error\"");
  record.error = *error_class;
  record.error_message = string_field(result, "message", "result.", false);
  const json &costs = member(result, "costs", "result.");
  if (!costs.is_array()) bad("field \"result.costs\" must be an array of seconds");
  for (const json &cost : costs) {
    if (!cost.is_number()) bad("field \"result.costs\" must hold numbers only");
    record.costs.push_back(cost.get<double>());
  }
  record.wall_s = number_field(result, "wall", "result.", false);

  record.runner = string_field(line, "runner", "", false);
  record.kiln_version = string_field(line, "kiln_version", "", false);
  record.timestamp = number_field(line, "timestamp", "", false);
  return record;
}

ordered_json record_to_autotvm_json(const Record &record) {
  check_writable(record);
  // AutoTVM's input is [target, task name, args, kwargs]. Kiln's arguments are one JSON value: an
  // array becomes args, an object becomes kwargs, anything else a one-element args list.
  json args = parse_json(record.workload.args);
  ordered_json task_args = ordered_json::array();
  ordered_json task_kwargs = ordered_json::object();
  if (args.is_array()) {
    task_args = ordered_json(args);
  } else if (args.is_object()) {
    task_kwargs = ordered_json(args);
  } else {
    task_args.push_back(ordered_json(args));
  }

  // AutoTVM's entity items are [knob, type, value]; Kiln's knobs carry no type, and "ot" (other
  // option) is the type that accepts any value. The space fingerprint plays code_hash's role.
  ordered_json entity = ordered_json::array();
  for (const auto &[name, value] : record.config.knobs) {
    entity.push_back(ordered_json::array({name, "ot", ordered_json::parse(value.dump())}));
  }
  ordered_json config;
  config["index"] = record.config.index;
  config["code_hash"] = record.config.space.empty() ? ordered_json() : ordered_json(record.config.space);
  config["entity"] = std::move(entity);

  // A failed measurement's costs are written as [1e9], as AutoTVM does.
  ordered_json costs = record.valid() ? ordered_json(record.costs) : ordered_json::array({1e9});

  ordered_json line;
  line["input"] = ordered_json::array({record.target.target, record.workload.template_name, task_args, task_kwargs});
  line["config"] = std::move(config);
  line["result"] = ordered_json::array({costs, autotvm_error_no(record.error), record.wall_s, record.timestamp});
  line["version"] = 0.2;
  line["tvm_version"] = "kiln-" + record.kiln_version;
  return line;
}

}  // namespace kiln::db
