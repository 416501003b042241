#pragma once
// DashboardApi: kilnd's web dashboard (docs/dashboard.md). It answers the HTTP paths besides
// /metrics of kilnd's HTTP server: the page and its assets (tuner/dashboard/, built into the
// binary; public), and the JSON API under /api/v1/ over the service's state: jobs and their
// tasks (JobManager), tuning curves and the tuning log (a read-only connection of its own), and
// the farm's tracker summary. Every /api/v1/ route needs "Authorization: Bearer TOKEN" with the
// service's token: without it, no data and no action (401).
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kiln/v1/tracker.pb.h"
#include "rpc_server/metrics_http.h"
#include "tuner/job_manager.h"

namespace kiln::db {
class TuningDb;
}

namespace kiln::tuner {

struct DashboardOptions {
  // The tuning log the manager runs from.
  std::string log_path;
  // The token every /api/v1/ request must carry.
  std::string token;
  // The farm's tracker summary; throws when the tracker cannot be reached. Empty: the service
  // measures on its own machine and has no farm.
  std::function<kiln::v1::SummaryReply()> farm_summary;
  // Where the service measures, shown on the page.
  std::string measuring;
};

class DashboardApi {
 public:
  // `manager` must outlive the API.
  DashboardApi(JobManager &manager, DashboardOptions options);
  ~DashboardApi();
  DashboardApi(const DashboardApi &) = delete;
  DashboardApi &operator=(const DashboardApi &) = delete;

  // Answers one request; never throws for a bad request (4xx with {"error": ...}).
  rpc::HttpResponse handle(const rpc::HttpRequest &request);

  // Whether the page's assets were built into this binary (npm was found at build time).
  static bool assets_built();

 private:
  rpc::HttpResponse api(const rpc::HttpRequest &request);
  rpc::HttpResponse asset(const rpc::HttpRequest &request) const;
  db::TuningDb &log_locked();

  JobManager &manager_;
  DashboardOptions options_;
  std::mutex log_mutex_;  // the read-only connection is used by one request at a time
  std::unique_ptr<db::TuningDb> log_;
};

}  // namespace kiln::tuner
