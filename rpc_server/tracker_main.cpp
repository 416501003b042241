// kiln-tracker: the device farm's tracker. Runners register with it and heartbeat; tuners lease
// runners from it. Shuts down cleanly on SIGINT or SIGTERM. Run with --help for the flags.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "deploy/version.h"
#include "rpc_server/service_host.h"
#include "rpc_server/signals.h"
#include "rpc_server/tracker_service.h"

int main(int argc, char **argv) {
  CLI::App app{"kiln-tracker: leases the runners of a Kiln device farm to tuners.", "kiln-tracker"};
  app.set_version_flag("--version", "kiln-tracker " + kiln::deploy::version());
  std::string listen = "127.0.0.1:9190", token_file, address_file;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  kiln::rpc::block_shutdown_signals();
  try {
    kiln::rpc::TrackerOptions options;
    options.token = kiln::rpc::load_token(token_file);
    options.heartbeat_interval = std::chrono::milliseconds(heartbeat_interval_ms);
    options.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
    options.lease_idle_timeout = std::chrono::milliseconds(lease_idle_timeout_ms);
    options.quarantine_after = quarantine_after;
    options.quarantine_duration = std::chrono::milliseconds(quarantine_ms);
    kiln::rpc::TrackerService service(options);
    kiln::rpc::ServiceHostOptions host_options;
    host_options.tls = tls;
    auto host = kiln::rpc::ServiceHost::start(listen, {&service}, host_options);
    std::fprintf(stderr, "kiln-tracker: serving %s on %s\n", kiln::deploy::version().c_str(), host->address().c_str());
    if (!address_file.empty()) kiln::rpc::write_file_atomically(address_file, host->address() + "\n");
    int signal = kiln::rpc::wait_for_shutdown_signal();
    std::fprintf(stderr, "kiln-tracker: %s, shutting down\n", strsignal(signal));
    service.tracker().shutdown();
    host->shutdown(std::chrono::seconds(2));
    host->wait();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-tracker: %s\n", e.what());
    return 1;
  }
  return 0;
}
