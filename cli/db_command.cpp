#include "cli/db_command.h"

#include "cli/progress.h"
#include "cli/table.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "contracts/error.h"
#include "db/error.h"
#include "db/record_json.h"
#include "db/tuning_db.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

namespace {

using db::Record;
using db::TuningDb;
using db::TuningDbError;
using nlohmann::ordered_json;

// Options shared by every `kiln db` subcommand.
struct DbOptions {
  std::string path = "./kiln.db";
  bool json = false;
};

// How a workload and a target are named on the command line.
struct LookupOptions {
  std::string workload;  // key or unique key prefix
  std::string template_name;
  std::string args;
  std::string target;
  std::string device;
};

// What a command does with the tuning log. Only a command that writes may create one; one that
// reads opens it read-only, so it works on a log it cannot write and never changes it.
enum class Access { kRead, kWrite, kCreate };

TuningDb open_db(const DbOptions &options, Access access) {
  db::TuningDbOptions open_options;
  open_options.create = access == Access::kCreate;
  open_options.read_only = access == Access::kRead;
  return TuningDb::open(options.path, open_options);
}

std::string format_time(double unix_seconds) {
  if (!(unix_seconds > 0)) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buffer;
}

std::string format_us(double seconds) {
  if (std::isnan(seconds)) return "-";
  return fmt::format("{:.2f}", seconds * 1e6);
}

std::string format_gflops(double flop, double seconds) {
  if (!(flop > 0) || !(seconds > 0)) return "-";
  return fmt::format("{:.2f}", flop / seconds / 1e9);
}

std::string format_knobs(const db::Config &config) {
  std::string text;
  for (const auto &[name, value] : config.knobs) {
    if (!text.empty()) text += ' ';
    text += name + '=' + value.dump();
  }
  return text.empty() ? "-" : text;
}

std::string short_key(const std::string &key) { return key.substr(0, 12); }

// --- naming workloads and targets ---

void add_lookup_options(CLI::App *command, LookupOptions &lookup, bool with_target) {
  auto *workload =
      command->add_option("-w,--workload", lookup.workload,
                          "workload key, or a prefix of it that names one workload (see `kiln db workloads`)");
  auto *template_name =
      command->add_option("--template", lookup.template_name, "template name, with --args, instead of --workload");
  auto *args = command->add_option("--args", lookup.args, "the workload's arguments as JSON, with --template");
  workload->excludes(template_name)->excludes(args);
  template_name->needs(args);
  args->needs(template_name);
  if (with_target) {
    command->add_option("-t,--target", lookup.target, "target string, e.g. \"llvm -mcpu=znver4\"")->required();
    command->add_option("-d,--device", lookup.device,
                        "device class (device key); needed when the target was measured on "
                        "several classes or never exactly");
  }
}

// The key of the workload --template and --args name. A template of the operator library puts the
// arguments in its canonical form first (its defaults filled in, numbers in one spelling), as
// `kiln measure` and `kiln tune` do when they record; the arguments of a template it does not know
// (a log written by a build with other templates) are taken as they are.
std::string workload_key_of(const std::string &template_name, const std::string &args) {
  const ops::Registry &registry = ops::Registry::builtin();
  if (!registry.contains(template_name)) return db::Workload::parse(template_name, args).key;
  contracts::Json value;
  try {
    value = contracts::Json::parse(args);
  } catch (const contracts::JsonError &e) {
    throw UserError("--args is not JSON: " + std::string(e.what()));
  }
  return registry.workload(template_name, value).key;
}

db::Workload resolve_workload(TuningDb &tuning_db, const LookupOptions &lookup) {
  if (lookup.workload.empty() && lookup.template_name.empty()) {
    throw UserError("name the workload with --workload KEY or --template NAME --args JSON");
  }
  if (!lookup.template_name.empty()) {
    const std::string key = workload_key_of(lookup.template_name, lookup.args);
    auto stored = tuning_db.workload(key);
    if (!stored) {
      throw UserError("unknown workload: no " + lookup.template_name + " workload with these arguments (key " + key +
                      ") in " + tuning_db.path());
    }
    return *stored;
  }
  const std::string &key = lookup.workload;
  if (key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw UserError("\"" + key + "\" is not a workload key (keys are lower-case hex)");
  }
  std::vector<db::Workload> found = tuning_db.workloads_with_prefix(key, 2);
  if (found.empty()) {
    throw UserError("unknown workload \"" + key + "\": no workload key in " + tuning_db.path() +
                    " starts with it (`kiln db workloads` lists them)");
  }
  if (found.size() > 1) {
    throw UserError("workload key prefix \"" + key + "\" is ambiguous (" + short_key(found[0].key) + ", " +
                    short_key(found[1].key) + ", ...); give more digits");
  }
  return found[0];
}

db::Target resolve_target(TuningDb &tuning_db, const LookupOptions &lookup) {
  if (!lookup.device.empty()) return db::Target::make(lookup.target, lookup.device);
  std::optional<db::Target> known = tuning_db.only_target_named(lookup.target);
  if (!known) {
    throw UserError("unknown target \"" + db::canonical_target(lookup.target) +
                    "\": nothing was measured on it; give --device to look up its device "
                    "class");
  }
  return *known;
}

db::Scope parse_scope(const std::string &scope) {
  if (scope == "auto") return db::Scope::kExactThenClass;
  if (scope == "exact") return db::Scope::kExact;
  return db::Scope::kDeviceClass;
}

ordered_json record_json(const Record &record, const db::Target &query) {
  ordered_json j;
  j["record_id"] = record.id;
  j["match"] = record.target.target == query.target ? "exact" : "device_class";
  j["mean_s"] = record.valid() ? ordered_json(record.mean()) : ordered_json();
  ordered_json fields = db::record_to_json(record);
  for (auto &[name, value] : fields.items()) j[name] = value;
  return j;
}

// --- subcommands ---

void workloads_command(const DbOptions &options, const std::string &template_name, int64_t limit) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  std::vector<db::WorkloadSummary> summaries = tuning_db.workloads(template_name, limit);
  if (options.json) {
    ordered_json out = ordered_json::array();
    for (const auto &s : summaries) {
      ordered_json j;
      j["key"] = s.workload.key;
      j["template"] = s.workload.template_name;
      j["args"] = ordered_json(db::parse_json(s.workload.args));
      j["flop"] = s.workload.flop;
      j["records"] = s.records;
      j["valid"] = s.valid;
      j["best_mean_s"] = s.best_mean_s ? ordered_json(*s.best_mean_s) : ordered_json();
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  Table table({"KEY", "TEMPLATE", "ARGS", "RECORDS", "VALID", "BEST_US", "GFLOPS"});
  for (const auto &s : summaries) {
    double best = s.best_mean_s.value_or(std::nan(""));
    table.add_row({short_key(s.workload.key), s.workload.template_name, abbreviate(s.workload.args, 48),
                   std::to_string(s.records), std::to_string(s.valid), format_us(best),
                   format_gflops(s.workload.flop, best)});
  }
  table.print(std::cout);
}

void best_command(const DbOptions &options, const LookupOptions &lookup, const std::string &scope) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  db::Workload workload = resolve_workload(tuning_db, lookup);
  db::Target target = resolve_target(tuning_db, lookup);
  std::optional<Record> best = tuning_db.best(workload.key, target, parse_scope(scope));
  if (!best) {
    throw UserError("no valid record for workload " + short_key(workload.key) + " (" + workload.template_name +
                    ") on " + target.target + " (device class " + target.device_key + ")");
  }
  if (options.json) {
    std::cout << record_json(*best, target).dump(2) << '\n';
    return;
  }
  bool exact = best->target.target == target.target;
  print_fields(std::cout, {{"workload", workload.key},
                           {"template", workload.template_name},
                           {"args", workload.args},
                           {"target", target.target + " (device class " + target.device_key + ")"},
                           {"match", exact ? "exact target" : "device class, measured on " + best->target.target},
                           {"config", fmt::format("index {}, space {}", best->config.index,
                                                  best->config.space.empty() ? "-" : best->config.space)},
                           {"knobs", format_knobs(best->config)},
                           {"mean_us", format_us(best->mean())},
                           {"repeats", std::to_string(best->costs.size())},
                           {"gflops", format_gflops(workload.flop, best->mean())},
                           {"runner", best->runner.empty() ? "-" : best->runner},
                           {"measured", format_time(best->timestamp) + " by Kiln " + best->kiln_version},
                           {"record", std::to_string(best->id)}});
}

void top_command(const DbOptions &options, const LookupOptions &lookup, int64_t k, const std::string &scope) {
  if (k <= 0) throw UserError("-k must be at least 1");
  TuningDb tuning_db = open_db(options, Access::kRead);
  db::Workload workload = resolve_workload(tuning_db, lookup);
  db::Target target = resolve_target(tuning_db, lookup);
  std::vector<Record> top = tuning_db.top_k(workload.key, target, k, parse_scope(scope));
  if (options.json) {
    ordered_json out = ordered_json::array();
    for (const Record &r : top) out.push_back(record_json(r, target));
    std::cout << out.dump(2) << '\n';
    return;
  }
  if (top.empty()) {
    throw UserError("no valid record for workload " + short_key(workload.key) + " on " + target.target +
                    " (device class " + target.device_key + ")");
  }
  Table table({"RANK", "MEAN_US", "GFLOPS", "INDEX", "TARGET", "RUNNER", "KNOBS"});
  int rank = 0;
  for (const Record &r : top) {
    table.add_row({std::to_string(++rank), format_us(r.mean()), format_gflops(workload.flop, r.mean()),
                   std::to_string(r.config.index), r.target.target, r.runner.empty() ? "-" : r.runner,
                   abbreviate(format_knobs(r.config), 60)});
  }
  table.print(std::cout);
}

void history_command(const DbOptions &options, const db::HistoryQuery &query) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  std::vector<Record> records = tuning_db.history(query);
  if (options.json) {
    ordered_json out = ordered_json::array();
    for (const Record &r : records) {
      ordered_json j = db::record_to_json(r);
      j["record_id"] = r.id;
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  Table table({"ID", "WORKLOAD", "TARGET", "INDEX", "ERROR", "MEAN_US", "MEASURED"});
  for (const Record &r : records) {
    table.add_row({std::to_string(r.id), short_key(r.workload.key), r.target.target, std::to_string(r.config.index),
                   std::string(db::to_string(r.error)), r.valid() ? format_us(r.mean()) : "-",
                   format_time(r.timestamp)});
  }
  table.print(std::cout);
}

ordered_json job_json(const db::Job &job) {
  ordered_json j;
  j["id"] = job.id;
  j["name"] = job.name;
  j["state"] = std::string(db::to_string(job.state));
  j["trials_done"] = job.trials_done;
  j["trials_total"] = job.trials_total;
  j["message"] = job.message;
  j["created_at"] = job.created_at;
  j["updated_at"] = job.updated_at;
  j["spec"] = ordered_json(job.spec);
  return j;
}

void jobs_command(const DbOptions &options, std::optional<int64_t> id) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  if (id) {
    db::JobProgress progress = tuning_db.job_progress(*id);
    if (options.json) {
      ordered_json j = job_json(progress.job);
      ordered_json measured = ordered_json::object();
      for (const auto &[key, indexes] : progress.measured) {
        std::vector<int64_t> sorted(indexes.begin(), indexes.end());
        std::sort(sorted.begin(), sorted.end());
        measured[key] = sorted;
      }
      j["measured"] = std::move(measured);
      std::cout << j.dump(2) << '\n';
      return;
    }
    const db::Job &job = progress.job;
    print_fields(std::cout, {{"id", std::to_string(job.id)},
                             {"name", job.name},
                             {"state", std::string(db::to_string(job.state))},
                             {"progress", fmt::format("{}/{}", job.trials_done, job.trials_total)},
                             {"records", std::to_string(progress.records)},
                             {"workloads", std::to_string(progress.measured.size())},
                             {"created", format_time(job.created_at)},
                             {"updated", format_time(job.updated_at)},
                             {"message", job.message.empty() ? "-" : job.message},
                             {"spec", job.spec.dump()}});
    return;
  }
  std::vector<db::Job> jobs = tuning_db.jobs();
  if (options.json) {
    ordered_json out = ordered_json::array();
    for (const auto &job : jobs) out.push_back(job_json(job));
    std::cout << out.dump(2) << '\n';
    return;
  }
  Table table({"ID", "NAME", "STATE", "DONE", "TOTAL", "UPDATED", "MESSAGE"});
  for (const auto &job : jobs) {
    table.add_row({std::to_string(job.id), job.name, std::string(db::to_string(job.state)),
                   std::to_string(job.trials_done), std::to_string(job.trials_total), format_time(job.updated_at),
                   abbreviate(job.message, 40)});
  }
  table.print(std::cout);
}

void stats_command(const DbOptions &options) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  db::Stats s = tuning_db.stats();
  if (options.json) {
    ordered_json j;
    j["path"] = tuning_db.path();
    j["schema_version"] = s.schema_version;
    j["workloads"] = s.workloads;
    j["targets"] = s.targets;
    j["devices"] = s.devices;
    j["jobs"] = s.jobs;
    j["records"] = s.records;
    j["valid"] = s.valid;
    ordered_json by_error = ordered_json::object();
    for (const auto &[error, n] : s.by_error) by_error[std::string(db::to_string(error))] = n;
    j["by_error"] = std::move(by_error);
    j["first_timestamp"] = s.first_timestamp ? ordered_json(*s.first_timestamp) : ordered_json();
    j["last_timestamp"] = s.last_timestamp ? ordered_json(*s.last_timestamp) : ordered_json();
    j["file_bytes"] = s.file_bytes;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::vector<std::pair<std::string, std::string>> fields = {
      {"path", tuning_db.path()},
      {"schema_version", std::to_string(s.schema_version)},
      {"workloads", std::to_string(s.workloads)},
      {"targets", std::to_string(s.targets)},
      {"devices", std::to_string(s.devices)},
      {"jobs", std::to_string(s.jobs)},
      {"records", std::to_string(s.records)},
      {"valid", std::to_string(s.valid)},
  };
  for (const auto &[error, n] : s.by_error) {
    if (error != db::ErrorClass::kOk) {
      fields.emplace_back("failed " + std::string(db::to_string(error)), std::to_string(n));
    }
  }
  fields.emplace_back("first", s.first_timestamp ? format_time(*s.first_timestamp) : "-");
  fields.emplace_back("last", s.last_timestamp ? format_time(*s.last_timestamp) : "-");
  fields.emplace_back("file_bytes", std::to_string(s.file_bytes));
  print_fields(std::cout, fields);
}

// Where `kiln db export -o PATH` writes the records.
struct ExportTarget {
  std::string path;
  // Written in place: a FIFO, a terminal, a device such as /dev/null or /dev/stdout. Renaming a
  // file over one of them would replace the node (as root, /dev/null itself).
  bool in_place = false;
};

// A regular file, or a path where nothing is yet, is written beside itself as PATH.partial and
// renamed over it, so a failed export leaves it as it was. A symbolic link is followed to what it
// names (so the link stays a link), however many links lead there, and that is written.
ExportTarget export_target(const std::string &output) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (::stat(output.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw UserError("cannot export to " + output + ": it is a directory");
    if (!S_ISREG(st.st_mode)) return {output, true};
    std::error_code ec;
    fs::path file = fs::canonical(output, ec);
    if (ec) throw UserError("cannot export to " + output + ": " + ec.message());
    return {file.string(), false};
  }
  // Nothing there, or links that end where nothing is yet: the file is made where the last link
  // points.
  fs::path at = output;
  for (int links = 0; links < 40; ++links) {
    std::error_code ec;
    if (!fs::is_symlink(at, ec)) return {at.string(), false};
    fs::path next = fs::read_symlink(at, ec);
    if (ec) throw UserError("cannot export to " + output + ": " + ec.message());
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  throw UserError("cannot export to " + output + ": too many levels of symbolic links");
}

// Whether `path` is the file standard output writes to, as /dev/stdout is: written through
// standard output itself, so that a shell's `>>` appends.
bool is_standard_output(const std::string &path) {
  struct stat file = {};
  struct stat out = {};
  return ::stat(path.c_str(), &file) == 0 && ::fstat(STDOUT_FILENO, &out) == 0 && file.st_dev == out.st_dev &&
         file.st_ino == out.st_ino;
}

void export_command(const DbOptions &options, const std::string &output, const std::string &format,
                    const db::ExportFilter &filter) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  db::ExportFormat export_format = format == "autotvm" ? db::ExportFormat::kAutoTvm : db::ExportFormat::kKiln;
  int64_t count = 0;
  Progress progress("exporting");
  auto show = [&progress](int64_t records) { progress.update(records); };
  if (output == "-" || is_standard_output(output)) {
    count = tuning_db.export_records(std::cout, export_format, filter, show);
    progress.finish();
    std::cerr << "exported " << count << " records" << (output == "-" ? "" : " to " + output) << '\n';
    return;
  }
  ExportTarget target = export_target(output);
  if (target.in_place) {
    std::ofstream out(target.path, std::ios::binary);
    if (!out) throw UserError("cannot write " + output + ": " + std::strerror(errno));
    count = tuning_db.export_records(out, export_format, filter, show);
  } else {
    std::string partial = target.path + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      if (!out) throw UserError("cannot write " + partial + ": " + std::strerror(errno));
      try {
        count = tuning_db.export_records(out, export_format, filter, show);
      } catch (...) {
        out.close();
        std::remove(partial.c_str());
        throw;
      }
    }
    // A file replaced keeps its permissions.
    std::error_code ec;
    auto permissions = std::filesystem::status(target.path, ec).permissions();
    if (!ec) std::filesystem::permissions(partial, permissions, ec);
    if (std::rename(partial.c_str(), target.path.c_str()) != 0) {
      int error = errno;
      std::remove(partial.c_str());
      throw UserError("cannot write " + target.path + ": " + std::strerror(error));
    }
  }
  progress.finish();
  if (options.json) {
    ordered_json j;
    j["exported"] = count;
    j["output"] = output;
    j["format"] = format;
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << "exported " << count << " records to " << output << '\n';
  }
}

void import_command(const DbOptions &options, const std::string &input, bool skip_bad_lines) {
  std::ifstream file;
  std::istream *in = &std::cin;
  if (input != "-") {
    file.open(input, std::ios::binary);
    if (!file) throw UserError("cannot read " + input);
    in = &file;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  bool existed = fs::exists(options.path, ec);
  std::optional<TuningDb> tuning_db = open_db(options, Access::kCreate);
  // A failed import into a new path leaves no empty log behind.
  auto discard_new_log = [&] {
    if (!tuning_db->created() || existed) return;
    fs::path file = fs::canonical(options.path, ec);
    tuning_db.reset();
    if (ec) return;
    for (const char *suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(file.string() + suffix, ec);
  };
  db::ImportResult result;
  try {
    Progress progress("importing");
    db::ImportOptions import_options;
    import_options.skip_bad_lines = skip_bad_lines;
    import_options.progress = [&progress](int64_t lines) { progress.update(lines); };
    result = tuning_db->import_records(*in, import_options);
  } catch (const TuningDbError &e) {
    discard_new_log();
    if (e.kind() != TuningDbError::Kind::kBadInput) throw;
    throw UserError(input + ": " + e.what() + " (--skip-bad-lines imports the good lines and reports the bad ones)");
  } catch (...) {
    discard_new_log();
    throw;
  }
  if (tuning_db->created()) std::cerr << "created new tuning log " << tuning_db->path() << '\n';
  for (const auto &bad : result.bad_lines) {
    std::cerr << input << ": line " << bad.line << ": skipped: " << bad.message << '\n';
  }
  if (options.json) {
    ordered_json j;
    j["imported"] = result.imported;
    j["duplicates"] = result.duplicates;
    ordered_json bad = ordered_json::array();
    for (const auto &b : result.bad_lines) bad.push_back({{"line", b.line}, {"message", b.message}});
    j["bad_lines"] = std::move(bad);
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << fmt::format(
        "imported {} records into {} ({} already present, {} bad lines "
        "skipped)\n",
        result.imported, tuning_db->path(), result.duplicates, result.bad_lines.size());
  }
}

// On a terminal, shows what would go and asks; elsewhere (a script, a pipe) does not ask.
bool confirm_prune(TuningDb &tuning_db, db::PruneOptions prune) {
  if (isatty(STDIN_FILENO) != 1 || isatty(STDERR_FILENO) != 1) return true;
  prune.dry_run = true;
  db::PruneResult would = tuning_db.prune(prune);
  if (would.deleted_valid + would.deleted_failed == 0) return true;
  std::cerr << fmt::format(
      "would delete {} valid and {} failed records from {} ({} bytes), leaving {}. Delete them? [y/N] ",
      would.deleted_valid, would.deleted_failed, tuning_db.path(), would.freed_bytes, would.kept);
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

void prune_command(const DbOptions &options, db::PruneOptions prune, const std::string &workload, bool vacuum,
                   bool yes) {
  if (workload.empty() && prune.template_name.empty() && prune.device_key.empty() && !prune.all) {
    throw UserError(
        "say what to prune: --template NAME, --device KEY or --workload KEY (together: the records of all of them), "
        "or --all for every record; nothing was deleted");
  }
  TuningDb tuning_db = open_db(options, Access::kWrite);
  if (!workload.empty()) {
    LookupOptions lookup;
    lookup.workload = workload;
    prune.workload_key = resolve_workload(tuning_db, lookup).key;
  }
  if (!prune.dry_run && !yes && !confirm_prune(tuning_db, prune)) {
    std::cout << "nothing deleted\n";
    return;
  }
  db::PruneResult result = tuning_db.prune(prune);
  std::optional<std::pair<int64_t, int64_t>> shrank;  // file bytes before and after VACUUM
  if (vacuum && !prune.dry_run) {
    int64_t before = tuning_db.stats().file_bytes;
    tuning_db.vacuum();
    shrank.emplace(before, tuning_db.stats().file_bytes);
  }
  if (options.json) {
    ordered_json j;
    j["dry_run"] = prune.dry_run;
    j["deleted_valid"] = result.deleted_valid;
    j["deleted_failed"] = result.deleted_failed;
    j["kept"] = result.kept;
    j["freed_bytes"] = result.freed_bytes;
    j["free_bytes"] = result.free_bytes;
    if (shrank) {
      j["file_bytes_before"] = shrank->first;
      j["file_bytes_after"] = shrank->second;
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::string freed;
  if (prune.dry_run) {
    freed = fmt::format("; would free {} bytes", result.freed_bytes);
  } else if (shrank) {
    freed = fmt::format("; freed {} bytes, the file shrank from {} to {} bytes", result.freed_bytes, shrank->first,
                        shrank->second);
  } else {
    freed = fmt::format("; freed {} bytes, {} bytes free in the file (--vacuum gives them back to the file system)",
                        result.freed_bytes, result.free_bytes);
  }
  std::cout << fmt::format("{} {} valid and {} failed records; {} records {}{}\n",
                           prune.dry_run ? "would delete" : "deleted", result.deleted_valid, result.deleted_failed,
                           result.kept, prune.dry_run ? "would remain" : "remain", freed);
}

void check_command(const DbOptions &options) {
  TuningDb tuning_db = open_db(options, Access::kRead);
  db::CheckReport report = tuning_db.check();
  if (options.json) {
    ordered_json j;
    j["ok"] = report.ok();
    j["problems"] = report.problems;
    std::cout << j.dump(2) << '\n';
  } else if (report.ok()) {
    std::cout << "ok: " << tuning_db.path() << '\n';
  } else {
    for (const auto &problem : report.problems) std::cout << problem << '\n';
  }
  if (!report.ok()) {
    throw UserError(std::to_string(report.problems.size()) + " problems found in " + tuning_db.path());
  }
}

}  // namespace

void add_db_command(CLI::App &kiln) {
  auto options = std::make_shared<DbOptions>();
  CLI::App *db = kiln.add_subcommand("db", "Query and maintain the tuning log.");
  db->require_subcommand(1);
  db->fallthrough();  // --db and --json are accepted after the subcommand too
  db->add_option("--db", options->path, "tuning-log file")->capture_default_str();
  db->add_flag("--json", options->json, "machine-readable JSON output");

  {
    auto *command = db->add_subcommand("workloads", "List workloads with their record counts.");
    auto template_name = std::make_shared<std::string>();
    auto limit = std::make_shared<int64_t>(0);
    command->add_option("--template", *template_name, "only this template");
    command->add_option("--limit", *limit, "at most this many (0: all)");
    command->callback([=] { workloads_command(*options, *template_name, *limit); });
  }
  {
    auto *command = db->add_subcommand("best",
                                       "The fastest valid config of a workload on a target (exact target first, then "
                                       "its device class).");
    auto lookup = std::make_shared<LookupOptions>();
    auto scope = std::make_shared<std::string>("auto");
    add_lookup_options(command, *lookup, true);
    command->add_option("--scope", *scope, "auto (exact target, then device class), exact, class")
        ->check(CLI::IsMember({"auto", "exact", "class"}))
        ->capture_default_str();
    command->callback([=] { best_command(*options, *lookup, *scope); });
  }
  {
    auto *command = db->add_subcommand("top", "The k fastest valid configs of a workload.");
    auto lookup = std::make_shared<LookupOptions>();
    auto k = std::make_shared<int64_t>(10);
    auto scope = std::make_shared<std::string>("auto");
    add_lookup_options(command, *lookup, true);
    command->add_option("-k", *k, "how many")->capture_default_str();
    command->add_option("--scope", *scope, "auto (exact target, then device class), exact, class")
        ->check(CLI::IsMember({"auto", "exact", "class"}))
        ->capture_default_str();
    command->callback([=] { top_command(*options, *lookup, *k, *scope); });
  }
  {
    auto *command =
        db->add_subcommand("history", "Every record of a template family on a device class (cost-model data).");
    auto query = std::make_shared<db::HistoryQuery>();
    command->add_option("--template", query->template_name, "template name")->required();
    command->add_option("-d,--device", query->device_key, "device class")->required();
    command->add_flag("--valid-only", query->valid_only, "leave out failed measurements");
    command->add_option("--limit", query->limit, "at most this many, oldest first (0: all)");
    command->callback([=] { history_command(*options, *query); });
  }
  {
    auto *command = db->add_subcommand("jobs", "List tuning jobs, or show one.");
    auto id = std::make_shared<int64_t>(0);
    auto *id_option = command->add_option("--id", *id, "show this job and what it measured");
    command->callback([=] { jobs_command(*options, id_option->count() ? std::optional<int64_t>(*id) : std::nullopt); });
  }
  {
    auto *command = db->add_subcommand("stats", "Counts of workloads, targets, jobs, records.");
    command->callback([=] { stats_command(*options); });
  }
  {
    auto *command =
        db->add_subcommand("export", "Write records as JSON lines: Kiln's format or AutoTVM's v0.2 log layout.");
    auto output = std::make_shared<std::string>("-");
    auto format = std::make_shared<std::string>("kiln");
    auto filter = std::make_shared<db::ExportFilter>();
    command->add_option("-o,--output", *output, "output file (- for stdout)")->capture_default_str();
    command->add_option("--format", *format, "kiln or autotvm")
        ->check(CLI::IsMember({"kiln", "autotvm"}))
        ->capture_default_str();
    command->add_option("--template", filter->template_name, "only this template");
    command->add_option("-d,--device", filter->device_key, "only this device class");
    command->add_option("-w,--workload", filter->workload_key, "only this workload key");
    command->add_flag("--valid-only", filter->valid_only, "leave out failed measurements");
    command->callback([=] { export_command(*options, *output, *format, *filter); });
  }
  {
    auto *command =
        db->add_subcommand("import", "Read records in Kiln's JSON-lines format (db/FORMAT.md); creates the file.");
    auto input = std::make_shared<std::string>();
    auto skip = std::make_shared<bool>(false);
    command->add_option("file", *input, "JSON-lines file (- for stdin)")->required();
    command->add_flag("--skip-bad-lines", *skip,
                      "import the good lines and report the bad ones (default: a bad line "
                      "imports nothing)");
    command->callback([=] { import_command(*options, *input, *skip); });
  }
  {
    auto *command = db->add_subcommand("prune",
                                       "Keep the fastest N valid records per workload and target of a template, "
                                       "device class or workload (or --all); records of unfinished jobs are kept. "
                                       "On a terminal it asks first.");
    auto prune = std::make_shared<db::PruneOptions>();
    auto workload = std::make_shared<std::string>();
    auto vacuum = std::make_shared<bool>(false);
    auto yes = std::make_shared<bool>(false);
    auto *template_name = command->add_option("--template", prune->template_name, "prune this template's records");
    auto *device = command->add_option("-d,--device", prune->device_key, "prune this device class's records");
    auto *workload_option =
        command->add_option("-w,--workload", *workload, "prune this workload's records (key or unique key prefix)");
    command->add_flag("--all", prune->all, "prune every record")
        ->excludes(template_name)
        ->excludes(device)
        ->excludes(workload_option);
    command->add_option("--keep", prune->keep, "valid records kept per workload and target")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    command->add_flag("--keep-failed", prune->keep_failed, "keep failed measurements");
    command->add_flag("--dry-run", prune->dry_run, "only count what would be deleted");
    command->add_flag("--vacuum", *vacuum, "give the freed space back to the file system");
    command->add_flag("-y,--yes", *yes, "do not ask on a terminal");
    command->callback([=] { prune_command(*options, *prune, *workload, *vacuum, *yes); });
  }
  {
    auto *command =
        db->add_subcommand("check", "Check the file's integrity and Kiln's invariants; exit 1 on a problem.");
    command->callback([=] { check_command(*options); });
  }
}

}  // namespace kiln::cli
