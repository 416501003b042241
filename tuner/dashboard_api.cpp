#include "tuner/dashboard_api.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "db/error_class.h"
#include "db/record_json.h"
#include "db/sqlite_db.h"
#include "db/tuning_db.h"
#include "rpc_server/shared_token.h"
#include "rpc_server/tracker_summary.h"
#include "tuner/curves.h"
#include "tuner/dashboard/assets.h"

namespace kiln::tuner {

namespace {

using nlohmann::json;
using rpc::HttpRequest;
using rpc::HttpResponse;

constexpr char kJsonType[] = "application/json";
constexpr char kApiPrefix[] = "/api/v1/";

// Shown at "/" when the page's assets were not built.
constexpr char kNotBuiltPage[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>Kiln dashboard</title></head><body>"
    "<h1>Kiln dashboard</h1><p>dashboard not built: npm was not found at build time.</p>"
    "<p>Install npm and build kilnd again; the JSON API under /api/v1/ and /metrics work "
    "without it.</p></body></html>\n";

HttpResponse json_reply(int status, const json &body) {
  HttpResponse response;
  response.status = status;
  response.content_type = kJsonType;
  response.body = body.dump();
  response.headers["Cache-Control"] = "no-store";
  return response;
}

HttpResponse error_reply(int status, const std::string &message) {
  return json_reply(status, json{{"error", message}});
}

json optional_number(const std::optional<double> &value) { return value ? json(*value) : json(nullptr); }

// sum(weight * default) / sum(weight * best) over the tasks with both; null without any.
json weighted_speedup(const JobStatus &status) {
  double defaults = 0, bests = 0;
  for (const TaskStatus &task : status.tasks) {
    if (!task.best_s || !task.default_s) continue;
    defaults += task.weight * *task.default_s;
    bests += task.weight * *task.best_s;
  }
  return bests > 0 ? json(defaults / bests) : json(nullptr);
}

json job_json(const JobReport &report) {
  const JobStatus &s = report.status;
  const int64_t left = std::max<int64_t>(0, s.trials_total - s.trials_done);
  double rate = 0;
  if (s.eta_s > 0 && left > 0) {
    rate = static_cast<double>(left) / s.eta_s;
  } else if (s.elapsed_s > 0) {
    rate = static_cast<double>(s.trials_done) / s.elapsed_s;
  }
  std::map<std::string, int64_t> errors;
  for (const TaskStatus &task : s.tasks) {
    for (const auto &[name, count] : task.errors) errors[name] += count;
  }
  return json{{"id", s.job_id},
              {"name", report.name},
              {"state", s.state},
              {"priority", report.priority},
              {"target", report.target},
              {"device_key", report.device_key},
              {"trials_done", s.trials_done},
              {"trials_total", s.trials_total},
              {"progress", s.trials_total > 0 ? static_cast<double>(s.trials_done) / s.trials_total : 0.0},
              {"elapsed_s", s.elapsed_s},
              {"eta_s", s.eta_s},
              {"trials_per_s", rate},
              {"weighted_speedup", weighted_speedup(s)},
              {"tasks", s.tasks.size()},
              {"errors", errors},
              {"message", s.message}};
}

json task_json(const TaskStatus &task) {
  return json{{"name", task.name},
              {"workload_key", task.workload_key},
              {"weight", task.weight},
              {"flop", task.flop},
              {"trials", task.trials},
              {"valid", task.valid},
              {"valid_fraction", task.trials > 0 ? static_cast<double>(task.valid) / task.trials : 0.0},
              {"default_s", optional_number(task.default_s)},
              {"best_s", optional_number(task.best_s)},
              {"speedup", task.speedup() > 0 ? json(task.speedup()) : json(nullptr)},
              {"best_gflops", task.best_gflops()},
              {"errors", task.errors},
              {"done", task.done}};
}

// The path's parts after /api/v1/: "jobs/3/pause" -> {"jobs", "3", "pause"}.
std::vector<std::string> split_path(const std::string &rest) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string::npos) slash = rest.size();
    if (slash > start) parts.push_back(rest.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

std::optional<int64_t> parse_id(const std::string &text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoll(text);
}

std::string query_value(const HttpRequest &request, const std::string &name) {
  auto it = request.query.find(name);
  return it == request.query.end() ? std::string() : it->second;
}

// Per runner, what the tuning log holds of its measurements: trials, failures by error class and the
// time of the last one, busiest first.
json runners_from_log(db::TuningDb &log) {
  db::Statement query = log.database().prepare(
      "SELECT runner, error_class, COUNT(*), MAX(measured_at) FROM record WHERE runner != '' "
      "GROUP BY runner, error_class");
  std::map<std::string, json> runners;
  while (query.step()) {
    json &r = runners[query.column_text(0)];
    if (r.is_null())
      r = json{{"runner", query.column_text(0)}, {"trials", 0}, {"failures", json::object()}, {"last_measured", 0.0}};
    const int64_t count = query.column_int64(2);
    r["trials"] = r["trials"].get<int64_t>() + count;
    r["last_measured"] = std::max(r["last_measured"].get<double>(), query.column_double(3));
    const std::optional<db::ErrorClass> error = db::error_class_from_code(static_cast<int>(query.column_int64(1)));
    if (!error || *error != db::ErrorClass::kOk) {
      r["failures"][error ? std::string(db::to_string(*error)) : "UNKNOWN"] = count;
    }
  }
  json out = json::array();
  for (auto &[name, r] : runners) out.push_back(std::move(r));
  std::sort(out.begin(), out.end(), [](const json &a, const json &b) { return a["trials"] > b["trials"]; });
  return out;
}

// The runners to show: the tracker's, in its order (by device key, then address), each with what
// the tuning log holds of it (matched by runner id), then the log's runners the tracker does not
// have now, busiest first, with the tracker's fields (`state` and the others) null.
json merge_runners(const kiln::v1::SummaryReply *summary, const json &from_log) {
  std::map<std::string, json> logged;
  for (const json &r : from_log) logged[r["runner"].get<std::string>()] = r;
  json out = json::array();
  if (summary) {
    for (const kiln::v1::RunnerSummary &t : summary->runners()) {
      auto it = logged.find(t.runner_id());
      json r =
          it != logged.end()
              ? it->second
              : json{
                    {"runner", t.runner_id()}, {"trials", 0}, {"failures", json::object()}, {"last_measured", nullptr}};
      if (it != logged.end()) logged.erase(it);
      r["state"] = rpc::runner_state_name(t.state());
      r["address"] = t.address();
      r["device_key"] = t.device_key();
      r["target"] = t.target();
      r["quarantine_reason"] = t.quarantine_reason();
      r["quarantine_left_s"] = t.quarantine_left_ms() / 1e3;
      r["last_heartbeat_s_ago"] = t.since_heartbeat_ms() / 1e3;
      r["leases_served"] = t.leases_served();
      r["leases_failed"] = t.leases_failed();
      r["leases_expired"] = t.leases_expired();
      r["consecutive_failures"] = t.consecutive_failures();
      out.push_back(std::move(r));
    }
  }
  for (const json &r : from_log) {
    auto it = logged.find(r["runner"].get<std::string>());
    if (it == logged.end()) continue;
    json entry = it->second;
    for (const char *field :
         {"state", "address", "device_key", "target", "quarantine_reason", "quarantine_left_s", "last_heartbeat_s_ago",
          "leases_served", "leases_failed", "leases_expired", "consecutive_failures"}) {
      entry[field] = nullptr;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

DashboardApi::DashboardApi(JobManager &manager, DashboardOptions options)
    : manager_(manager), options_(std::move(options)) {}

DashboardApi::~DashboardApi() = default;

bool DashboardApi::assets_built() { return dashboard::kAssetsBuilt; }

db::TuningDb &DashboardApi::log_locked() {
  if (!log_) {
    db::TuningDbOptions read_only;
    read_only.read_only = true;
    log_ = std::make_unique<db::TuningDb>(db::TuningDb::open(options_.log_path, read_only));
  }
  return *log_;
}

HttpResponse DashboardApi::handle(const HttpRequest &request) {
  if (request.path.rfind(kApiPrefix, 0) == 0 || request.path == "/api/v1") {
    auto auth = request.headers.find("authorization");
    if (auth == request.headers.end() || !rpc::bearer_matches(auth->second, options_.token)) {
      HttpResponse response = error_reply(
          401, auth == request.headers.end() ? "missing token: send Authorization: Bearer TOKEN" : "wrong token");
      response.headers["WWW-Authenticate"] = "Bearer";
      return response;
    }
    try {
      return api(request);
    } catch (const UnknownJobError &e) {
      return error_reply(404, e.what());
    } catch (const JobStateError &e) {
      return error_reply(409, e.what());
    } catch (const ServiceStoppingError &e) {
      return error_reply(503, e.what());
    } catch (const UserError &e) {
      return error_reply(400, e.what());
    } catch (const std::exception &e) {
      return error_reply(500, e.what());
    }
  }
  if (request.method != "GET") return error_reply(405, "only GET is served outside /api/v1/");
  return asset(request);
}

HttpResponse DashboardApi::asset(const HttpRequest &request) const {
  const std::string path = request.path == "/" ? "/index.html" : request.path;
  if (!dashboard::kAssetsBuilt && path == "/index.html") {
    HttpResponse response;
    response.content_type = "text/html; charset=utf-8";
    response.body = kNotBuiltPage;
    return response;
  }
  for (size_t i = 0; i < dashboard::kAssetCount; ++i) {
    const dashboard::Asset &a = dashboard::kAssets[i];
    if (path != a.path) continue;
    HttpResponse response;
    response.content_type = a.content_type;
    response.body.assign(reinterpret_cast<const char *>(a.data), a.size);
    response.headers["Cache-Control"] = "no-cache";
    return response;
  }
  HttpResponse response;
  response.status = 404;
  response.body = "not found\n";
  return response;
}

HttpResponse DashboardApi::api(const HttpRequest &request) {
  const std::vector<std::string> parts =
      split_path(request.path.substr(std::min(request.path.size(), sizeof kApiPrefix - 1)));
  const bool get = request.method == "GET", post = request.method == "POST";
  if (parts.empty()) return error_reply(404, "no such route: " + request.path);

  if (parts[0] == "service" && parts.size() == 1 && get) {
    return json_reply(200, json{{"api", "v1"},
                                {"measuring", options_.measuring},
                                {"farm", static_cast<bool>(options_.farm_summary)},
                                {"log", options_.log_path}});
  }

  if (parts[0] == "jobs") {
    if (parts.size() == 1) {
      if (!get) return error_reply(405, "GET " + request.path);
      json jobs = json::array();
      for (const JobReport &listed : manager_.list()) {
        // The list has no tasks; the weighted speedup and error classes need them.
        JobReport report = listed;
        try {
          report = manager_.get(listed.status.job_id);
        } catch (const UnknownJobError &) {
        }
        jobs.push_back(job_json(report));
      }
      return json_reply(200, json{{"jobs", jobs}});
    }
    const std::optional<int64_t> id = parse_id(parts[1]);
    if (!id) return error_reply(400, "a job id is a positive integer, not '" + parts[1] + "'");
    if (parts.size() == 2) {
      if (!get) return error_reply(405, "GET " + request.path);
      const JobReport report = manager_.get(*id);
      json job = job_json(report);
      json tasks = json::array();
      for (const TaskStatus &task : report.status.tasks) tasks.push_back(task_json(task));
      job["tasks"] = tasks;
      return json_reply(200, job);
    }
    if (parts.size() == 3 && parts[2] == "curves") {
      if (!get) return error_reply(405, "GET " + request.path);
      const JobReport report = manager_.get(*id);  // UnknownJobError for an unknown job
      std::vector<Curve> curves;
      {
        std::lock_guard<std::mutex> lock(log_mutex_);
        curves = job_curves(log_locked(), *id);
      }
      // The curves and the tasks both follow the job's spec; two tasks may share a name.
      const std::vector<TaskStatus> &tasks = report.status.tasks;
      const bool in_order = tasks.size() == curves.size();
      json out = json::array();
      for (size_t i = 0; i < curves.size(); ++i) {
        const Curve &curve = curves[i];
        const double f = in_order ? tasks[i].flop : 0;
        json best_s = json::array(), gflops = json::array();
        for (double g : curve.best_gflops) {
          gflops.push_back(g);
          best_s.push_back(g > 0 && f > 0 ? json(f / (g * 1e9)) : json(nullptr));
        }
        out.push_back(json{
            {"name", curve.name},
            {"workload_key", in_order ? tasks[i].workload_key : std::string()},
            {"best_gflops", gflops},
            {"best_s", best_s},
            {"default_gflops", curve.default_gflops},
            {"default_s", curve.default_gflops > 0 && f > 0 ? json(f / (curve.default_gflops * 1e9)) : json(nullptr)}});
      }
      return json_reply(200, json{{"job_id", *id}, {"curves", out}});
    }
    if (parts.size() == 3 && (parts[2] == "pause" || parts[2] == "resume" || parts[2] == "cancel")) {
      if (!post) return error_reply(405, "POST " + request.path);
      const JobReport report = parts[2] == "pause"    ? manager_.pause(*id)
                               : parts[2] == "resume" ? manager_.resume(*id)
                                                      : manager_.cancel(*id);
      return json_reply(200, job_json(report));
    }
    return error_reply(404, "no such route: " + request.path);
  }

  if (parts[0] == "farm" && parts.size() == 1 && get) {
    json from_log;
    {
      std::lock_guard<std::mutex> lock(log_mutex_);
      from_log = runners_from_log(log_locked());
    }
    if (!options_.farm_summary) {
      return json_reply(200, json{{"farm", false},
                                  {"measuring", options_.measuring},
                                  {"devices", json::array()},
                                  {"runners", merge_runners(nullptr, from_log)}});
    }
    kiln::v1::SummaryReply summary;
    try {
      summary = options_.farm_summary();
    } catch (const std::exception &e) {
      return json_reply(200, json{{"farm", true},
                                  {"measuring", options_.measuring},
                                  {"reachable", false},
                                  {"error", e.what()},
                                  {"devices", json::array()},
                                  {"runners", merge_runners(nullptr, from_log)}});
    }
    json devices = json::array();
    for (const auto &d : summary.devices()) {
      devices.push_back(json{{"device_key", d.device_key()},
                             {"free", d.free_runners()},
                             {"busy", d.busy_runners()},
                             {"quarantined", d.quarantined_runners()},
                             {"queue_length", d.queue_length()},
                             {"targets", std::vector<std::string>(d.targets().begin(), d.targets().end())}});
    }
    return json_reply(200, json{{"farm", true},
                                {"measuring", options_.measuring},
                                {"reachable", true},
                                {"devices", devices},
                                {"runners", merge_runners(&summary, from_log)}});
  }

  if (parts[0] == "log" && get) {
    std::lock_guard<std::mutex> lock(log_mutex_);
    db::TuningDb &log = log_locked();
    if (parts.size() == 1) {
      const std::string template_name = query_value(request, "template");
      const std::string search = query_value(request, "q");
      const db::Stats stats = log.stats();
      json by_error = json::object();
      for (const auto &[error, count] : stats.by_error) {
        if (error != db::ErrorClass::kOk) by_error[std::string(db::to_string(error))] = count;
      }
      json workloads = json::array();
      for (const db::WorkloadSummary &w : log.workloads(template_name, 0)) {
        if (!search.empty() && w.workload.key.find(search) == std::string::npos &&
            w.workload.template_name.find(search) == std::string::npos) {
          continue;
        }
        workloads.push_back(json{{"key", w.workload.key},
                                 {"template", w.workload.template_name},
                                 {"args", w.workload.args},
                                 {"flop", w.workload.flop},
                                 {"records", w.records},
                                 {"valid", w.valid},
                                 {"best_s", optional_number(w.best_mean_s)}});
        if (workloads.size() >= 500) break;
      }
      return json_reply(200, json{{"records", stats.records},
                                  {"valid", stats.valid},
                                  {"jobs", stats.jobs},
                                  {"targets", stats.targets},
                                  {"errors", by_error},
                                  {"workloads", workloads}});
    }
    if (parts.size() == 2 && parts[1] == "best") {
      const std::string key = query_value(request, "workload");
      if (key.empty()) return error_reply(400, "say which workload: ?workload=KEY");
      if (!log.workload(key)) return error_reply(404, "the tuning log has no workload '" + key + "'");
      json best = json::array();
      for (const db::Target &target : log.targets()) {
        const std::optional<db::Record> record = log.best(key, target, db::Scope::kExact);
        if (!record) continue;
        best.push_back(json{{"target", target.target},
                            {"device_key", target.device_key},
                            {"mean_s", record->mean()},
                            {"record", json::parse(db::record_to_json(*record).dump())}});
      }
      return json_reply(200, json{{"workload", key}, {"best", best}});
    }
    if (parts.size() == 2 && parts[1] == "export") {
      db::ExportFilter filter;
      filter.workload_key = query_value(request, "workload");
      filter.template_name = query_value(request, "template");
      filter.valid_only = query_value(request, "valid") == "1";
      HttpResponse response;
      response.content_type = "application/x-ndjson";
      log.for_each_record(filter, [&response](const db::Record &record) {
        response.body += db::record_to_json(record).dump();
        response.body += '\n';
      });
      response.headers["Content-Disposition"] = "attachment; filename=\"kiln-records.jsonl\"";
      return response;
    }
  }
  return error_reply(request.method == "GET" || request.method == "POST" ? 404 : 405,
                     "no such route: " + request.method + " " + request.path);
}

}  // namespace kiln::tuner
