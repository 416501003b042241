// kiln-tracker: the device farm's tracker. Runners register with it and heartbeat; tuners lease
// runners from it. One line per event goes to stderr (--log-format text|json); with
// --metrics-listen it serves Prometheus metrics (rpc_server/tracker_metrics.h) and prints
// "metrics listening on HOST:PORT" on stdout. Shuts down cleanly on SIGINT or SIGTERM. Run with
// --help for the flags.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "deploy/version.h"
#include "rpc_server/event_log.h"
#include "rpc_server/metrics.h"
#include "rpc_server/metrics_http.h"
#include "rpc_server/service_host.h"
#include "rpc_server/signals.h"
#include "rpc_server/tracker_metrics.h"
#include "rpc_server/tracker_service.h"

int main(int argc, char **argv) {
  CLI::App app{"kiln-tracker: leases the runners of a Kiln device farm to tuners.", "kiln-tracker"};
  app.set_version_flag("--version", "kiln-tracker " + kiln::deploy::version());
  std::string listen = "127.0.0.1:9190", token_file, address_file, log_format = "text", metrics_listen;
  kiln::rpc::TlsFiles tls;
  kiln::rpc::TrackerOptions defaults;
  int64_t heartbeat_interval_ms = defaults.heartbeat_interval.count();
  int64_t heartbeat_timeout_ms = defaults.heartbeat_timeout.count();
  int64_t lease_idle_timeout_ms = defaults.lease_idle_timeout.count();
  int quarantine_after = defaults.quarantine_after;
  int64_t quarantine_ms = defaults.quarantine_duration.count();
  app.add_option("--listen", listen, "where to serve (port 0: any free port)")->capture_default_str();
  app.add_option(
      "--token-file", token_file,
      std::string("file holding the farm's shared token (default: $") + kiln::rpc::kTokenEnvironmentVariable + ")");
  app.add_option("--tls-cert", tls.cert_file, "PEM certificate of the tracker (enables TLS)");
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca_file, "PEM CA certificates: require and verify client certificates");
  app.add_option("--heartbeat-interval-ms", heartbeat_interval_ms, "how often runners heartbeat")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(10), int64_t(600000)));
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms, "a silent runner is dropped after this")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(10), int64_t(3600000)));
  app.add_option("--lease-idle-timeout-ms", lease_idle_timeout_ms,
                 "a lease without a measurement session is revoked after this")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(10), int64_t(86400000)));
  app.add_option("--quarantine-after", quarantine_after, "consecutive failed leases that quarantine a runner")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--quarantine-ms", quarantine_ms, "how long a quarantine lasts")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(86400000)));
  app.add_option("--address-file", address_file, "write the bound address to this file once serving");
  app.add_option("--log-format", log_format, "the format of the event lines on stderr")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free port)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  kiln::rpc::EventLog log("tracker", kiln::rpc::parse_log_format(log_format));
  kiln::rpc::block_shutdown_signals();
  try {
    kiln::rpc::TrackerOptions options;
    options.events = &log;
    options.token = kiln::rpc::load_token(token_file);
    options.heartbeat_interval = std::chrono::milliseconds(heartbeat_interval_ms);
    options.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
    options.lease_idle_timeout = std::chrono::milliseconds(lease_idle_timeout_ms);
    options.quarantine_after = quarantine_after;
    options.quarantine_duration = std::chrono::milliseconds(quarantine_ms);
    kiln::rpc::TrackerService service(options);
    kiln::rpc::ServiceHostOptions host_options;
    host_options.tls = tls;
    kiln::rpc::MetricsRegistry metrics;
    kiln::rpc::add_process_metrics(metrics, "tracker", kiln::deploy::version());
    kiln::rpc::add_tracker_metrics(metrics, service.tracker());
    auto host = kiln::rpc::ServiceHost::start(listen, {&service}, host_options);
    std::unique_ptr<kiln::rpc::MetricsServer> metrics_server;
    if (!metrics_listen.empty()) metrics_server = kiln::rpc::MetricsServer::start(metrics_listen, metrics);
    log.info("serving", {{"version", kiln::deploy::version()}, {"address", host->address()}});
    if (metrics_server) {
      log.info("metrics_serving", {{"address", metrics_server->address()}});
      std::cout << "metrics listening on " << metrics_server->address() << std::endl;
    }
    if (!address_file.empty()) kiln::rpc::write_file_atomically(address_file, host->address() + "\n");
    int signal = kiln::rpc::wait_for_shutdown_signal();
    log.info("shutting_down", {{"signal", std::string(strsignal(signal))}});
    if (metrics_server) metrics_server->stop();
    service.tracker().shutdown();
    host->shutdown(std::chrono::seconds(2));
    host->wait();
    log.info("stopped");
  } catch (const std::exception &e) {
    log.error("fatal", {{"error", std::string(e.what())}});
    return 1;
  }
  return 0;
}
