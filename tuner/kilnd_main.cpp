// kilnd: the tuning service. Clients (`kiln tune --daemon`, `kiln jobs --daemon`) submit tuning
// jobs over gRPC (kiln.v1.Tuner); kilnd runs them from one tuning log, several at once, measuring
// on a device farm (--tracker) or on this machine (--local). The bound address is the first line
// on stdout once it serves; one line per event goes to stderr (--log-format text|json). With
// --http (alias --metrics-listen) it serves over HTTP Prometheus metrics at /metrics
// (tuner/tuner_metrics.h) and the web dashboard at / with its JSON API under /api/v1/
// (docs/dashboard.md), and prints "metrics listening on HOST:PORT" and then
// "dashboard at http://HOST:PORT/" as the next lines on stdout. SIGINT or SIGTERM pauses the
// running jobs after their batch in flight and exits 0; the next start resumes them. Run with
// --help for the flags.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "contracts/target.h"
#include "deploy/version.h"
#include "rpc_server/credentials.h"
#include "rpc_server/event_log.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/metrics.h"
#include "rpc_server/metrics_http.h"
#include "rpc_server/service_host.h"
#include "rpc_server/signals.h"
#include "tuner/dashboard_api.h"
#include "tuner/job_manager.h"
#include "tuner/measurer.h"
#include "tuner/tuner_metrics.h"
#include "tuner/tuner_service.h"

int main(int argc, char **argv) {
  // --local measures in worker processes that run this executable again.
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return kiln::rpc::measure_worker_main();

  CLI::App app{"kilnd: the Kiln tuning service. Runs tuning jobs that clients submit, from one tuning log.", "kilnd"};
  app.set_version_flag("--version", "kilnd " + kiln::deploy::version());
  std::string db = "kiln.db", tracker, listen = "127.0.0.1:9290", token_file, farm_token_file, address_file;
  std::string target = "llvm -mcpu=native", device_key = "local-cpu";
  std::string log_format = "text", http_listen;
  bool local = false;
  int max_jobs = 2, build_workers = 0;
  double give_up_after_s = 3600;
  kiln::rpc::TlsFiles tls, farm_tls;
  app.add_option("--db", db, "the tuning log (created when missing)")->capture_default_str();
  auto *tracker_option = app.add_option("--tracker", tracker, "measure on the device farm of this tracker, HOST:PORT");
  auto *local_option = app.add_flag("--local", local, "measure on this machine, in a local sandbox");
  tracker_option->excludes(local_option);
  app.add_option("--listen", listen, "where to serve (port 0: any free port)")->capture_default_str();
  app.add_option("--token-file", token_file,
                 std::string("file holding the shared token clients must send (default: $") +
                     kiln::rpc::kTokenEnvironmentVariable + ")");
  app.add_option("--max-jobs", max_jobs, "jobs running at once")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--target", target, "the target of jobs that name none (with --local: the only one)")
      ->capture_default_str();
  app.add_option("--device-key", device_key, "the device class of jobs that name none")->capture_default_str();
  app.add_option("--give-up-after", give_up_after_s,
                 "seconds a job waits for an unusable measurer (unreachable farm, no runner) before it fails")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30 * 86400.0));
  app.add_option("--build-workers", build_workers, "with --local: parallel builds (default: one per core)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--tls-cert", tls.cert_file, "PEM certificate of the service (enables TLS)");
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca_file, "PEM CA certificates: require and verify client certificates");
  app.add_option("--farm-token-file", farm_token_file, "the farm's token, when it is not the service's");
  app.add_option("--farm-tls-ca", farm_tls.ca_file, "PEM CA certificates that sign the farm's");
  app.add_option("--farm-tls-cert", farm_tls.cert_file, "PEM client certificate for the farm (mutual TLS)");
  app.add_option("--farm-tls-key", farm_tls.key_file, "PEM private key of --farm-tls-cert");
  app.add_option("--address-file", address_file, "also write the bound address to this file once serving");
  app.add_option("--log-format", log_format, "the format of the event lines on stderr")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--http,--metrics-listen", http_listen,
                 "serve the dashboard at http://HOST:PORT/ and Prometheus metrics at /metrics (port 0: any free "
                 "port)");
  app.footer(
      "Examples:\n"
      "  kilnd --db kiln.db --local --token-file kiln.token\n"
      "  kilnd --db kiln.db --tracker 127.0.0.1:9190 --token-file farm.token --max-jobs 4");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (tracker.empty() && !local) {
    std::fprintf(stderr, "kilnd: say where to measure: --tracker ADDR (a device farm) or --local (this machine)\n");
    return 2;
  }
  kiln::rpc::EventLog log("kilnd", kiln::rpc::parse_log_format(log_format));
  kiln::rpc::block_shutdown_signals();
  try {
    kiln::rpc::MetricsRegistry metrics;
    kiln::rpc::add_process_metrics(metrics, "kilnd", kiln::deploy::version());
    kiln::tuner::TunerMetrics tuner_metrics(metrics);
    auto waited = [&tuner_metrics](double seconds) { tuner_metrics.farm_waited(seconds); };

    const std::string token = kiln::rpc::load_token(token_file);
    target = kiln::contracts::canonical_target(target);

    kiln::tuner::JobManagerOptions options;
    options.log_path = db;
    options.target = target;
    options.device_key = device_key;
    options.max_running = max_jobs;
    options.give_up_after = std::chrono::milliseconds(static_cast<int64_t>(give_up_after_s * 1000));
    options.events = &log;
    options.observer = &tuner_metrics;
    std::string measures;
    if (local) {
      kiln::tuner::LocalMeasurerOptions lo;
      lo.build_workers = build_workers;
      lo.waited = waited;
      // Every job shares the one machine: their batches take turns.
      auto machine = std::make_shared<kiln::tuner::LocalMeasurer>(target, lo);
      options.measurer = [machine, target](const kiln::tuner::MeasurerRequest &r) {
        if (!kiln::contracts::same_target(r.target, target)) {
          throw kiln::tuner::TuneError("this kilnd measures on its own machine, for '" + target +
                                       "'; it cannot measure for '" + r.target + "'");
        }
        return kiln::tuner::LocalMeasurer::share(machine, r.measure);
      };
      measures = "on this machine for '" + target + "'";
    } else {
      kiln::rpc::FarmClientOptions farm;
      farm.tracker = {tracker, farm_token_file.empty() ? token : kiln::rpc::load_token(farm_token_file), farm_tls};
      farm.runner_tls = farm_tls;
      // Short waits, so that a pause is not held up by a busy farm; the job's back-off waits longer.
      farm.acquire_wait = std::chrono::seconds(20);
      farm.waited = waited;
      options.measurer = [farm](const kiln::tuner::MeasurerRequest &r) -> std::unique_ptr<kiln::tuner::Measurer> {
        kiln::rpc::FarmClientOptions job = farm;
        job.priority = r.priority;
        return std::make_unique<kiln::tuner::FarmMeasurer>(job, r.measure);
      };
      measures = "on the farm of " + tracker;
    }
    kiln::tuner::DashboardOptions dashboard_options;
    dashboard_options.log_path = db;
    dashboard_options.token = token;
    dashboard_options.measuring = measures;
    if (!local) {
      const kiln::rpc::Endpoint farm_tracker{
          tracker, farm_token_file.empty() ? token : kiln::rpc::load_token(farm_token_file), farm_tls};
      dashboard_options.farm_summary = [farm_tracker] { return kiln::rpc::TrackerClient(farm_tracker).summary(); };
    }

    kiln::tuner::JobManager manager(options);
    manager.start();
    tuner_metrics.watch_jobs(manager);
    kiln::tuner::TunerService service(manager, token);
    kiln::rpc::ServiceHostOptions host_options;
    host_options.tls = tls;
    host_options.max_message_bytes = kiln::tuner::TunerService::kMaxMessageBytes;
    auto host = kiln::rpc::ServiceHost::start(listen, {&service}, host_options);
    std::cout << host->address() << std::endl;
    kiln::tuner::DashboardApi dashboard(manager, dashboard_options);
    std::unique_ptr<kiln::rpc::MetricsServer> metrics_server;
    if (!http_listen.empty()) {
      metrics_server = kiln::rpc::MetricsServer::start(
          http_listen, metrics, [&dashboard](const kiln::rpc::HttpRequest &r) { return dashboard.handle(r); });
    }
    if (!address_file.empty()) kiln::rpc::write_file_atomically(address_file, host->address() + "\n");
    log.info("serving", {{"version", kiln::deploy::version()},
                         {"address", host->address()},
                         {"db", db},
                         {"measuring", measures},
                         {"max_jobs", max_jobs}});
    if (metrics_server) {
      log.info("metrics_serving", {{"address", metrics_server->address()}});
      std::cout << "metrics listening on " << metrics_server->address() << std::endl;
      std::cout << "dashboard at http://" << metrics_server->address() << "/" << std::endl;
    }
    const int signal = kiln::rpc::wait_for_shutdown_signal();
    log.info("shutting_down",
             {{"signal", std::string(strsignal(signal))}, {"action", "pausing the running jobs after their batch"}});
    manager.shutdown();
    if (metrics_server) metrics_server->stop();
    host->shutdown(std::chrono::seconds(2));
    host->wait();
    log.info("stopped");
  } catch (const std::exception &e) {
    log.error("fatal", {{"error", std::string(e.what())}});
    return 1;
  }
  return 0;
}
