#include "rpc_server/runner_daemon.h"

#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "compiler/driver/target.h"
#include "deploy/version.h"
#include "rpc_server/credentials.h"
#include "rpc_server/cuda_backend.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/event_log.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/metrics.h"
#include "rpc_server/metrics_http.h"
#include "rpc_server/runner_agent.h"
#include "rpc_server/runner_service.h"
#include "rpc_server/service_host.h"
#include "rpc_server/signals.h"

namespace kiln::rpc {

namespace {

// Info's description of the GPU.
kiln::v1::GpuDevice gpu_device(const CudaDeviceInfo &info) {
  kiln::v1::GpuDevice gpu;
  gpu.set_name(info.name);
  gpu.set_compute_capability(static_cast<uint32_t>(info.compute_capability));
  gpu.set_sm_count(static_cast<uint32_t>(info.sm_count));
  gpu.set_memory_bytes(static_cast<uint64_t>(info.memory_bytes));
  gpu.set_core_clock_khz(static_cast<uint32_t>(info.core_clock_khz));
  gpu.set_memory_clock_khz(static_cast<uint32_t>(info.memory_clock_khz));
  gpu.set_memory_bus_bits(static_cast<uint32_t>(info.memory_bus_bits));
  gpu.set_l2_bytes(static_cast<uint64_t>(info.l2_bytes));
  gpu.set_driver_version(static_cast<uint32_t>(info.driver_version));
  return gpu;
}

// The runner's metrics (besides the process metrics):
//   kiln_runner_builds_total, kiln_runner_runs_total      counters: builds and timed runs done
//   kiln_runner_candidates_total{result}                  counter: results by error class
//   kiln_runner_workers_started_total                     counter: worker processes started
//   kiln_runner_worker_restarts_total                     counter: workers replaced
struct RunnerMetrics {
  explicit RunnerMetrics(MetricsRegistry &registry)
      : builds(registry.counter("kiln_runner_builds_total", "Candidates built by the measurement workers.").get()),
        runs(registry.counter("kiln_runner_runs_total", "Candidates timed by the measurement workers.").get()),
        results(registry.counter("kiln_runner_candidates_total",
                                 "Candidates measured, by result (ok or the error class, lower case).", {"result"})),
        started(registry.counter("kiln_runner_workers_started_total", "Measurement worker processes started.").get()),
        restarts(registry
                     .counter("kiln_runner_worker_restarts_total",
                              "Measurement workers replaced after a crash, a timeout or a cancel.")
                     .get()) {}

  void hook(MeasurePoolOptions &options) {
    options.trace = [this](const MeasureTraceEvent &e) { (e.kind == MeasureTraceEvent::Build ? builds : runs).inc(); };
    options.observe_result = [this](const kiln::v1::MeasureResult &r) {
      std::string name = kiln::v1::ErrorClass_Name(r.error());
      for (char &c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      results.with({name}).inc();
    };
  }
  void watch(MetricsRegistry &registry, const MeasurePool &pool) {
    registry.on_collect([this, &pool] {
      started.set_total(pool.workers_started());
      restarts.set_total(pool.worker_restarts());
    });
  }

  Counter &builds, &runs;
  Family<Counter> &results;
  Counter &started, &restarts;
};

}  // namespace

int runner_daemon_main(int argc, char **argv, const MeasureExtension &extension) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") return measure_worker_main(extension);
  CLI::App app{"kiln-runner: compiles and times tuning candidates for a Kiln device farm.", "kiln-runner"};
  app.set_version_flag("--version", "kiln-runner " + deploy::version());
  std::string tracker, key, listen = "127.0.0.1:0", advertise, target, token_file, address_file;
  std::string log_format = "text", metrics_listen;
  TlsFiles tls;
  int build_workers = 0;
  uint64_t memory_limit_mb = 8192;
  app.add_option("--tracker", tracker, "the tracker's address, HOST:PORT")->required();
  app.add_option("--key", key, "the device key: the class of identical devices this one belongs to")->required();
  app.add_option("--listen", listen, "where to serve the Runner service (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--advertise", advertise,
                 "the address tuners use to reach this runner (default: the listening address)");
  app.add_option("--target", target, "the target string; -mcpu=native is this host's CPU (default: this host's CPU)");
  app.add_option("--token-file", token_file,
                 std::string("file holding the farm's shared token (default: $") + kTokenEnvironmentVariable + ")");
  app.add_option("--tls-cert", tls.cert_file, "PEM certificate of this runner (enables TLS)");
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca_file, "PEM CA certificates: verify the tracker, and require client certificates");
  app.add_option("--tls-server-name", tls.server_name_override, "the name to expect in the tracker's certificate");
  app.add_option("--build-workers", build_workers, "parallel builds (0: one per core)")->check(CLI::Range(0, 256));
  app.add_option("--memory-limit-mb", memory_limit_mb, "address-space limit of each worker process (none for a cuda target, whose driver reserves address space for the GPU)")
      ->capture_default_str()
      ->check(CLI::Range(64, 1 << 24));
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
  EventLog log("runner", parse_log_format(log_format));

  // Block the shutdown signals in every thread; the main thread waits for them below.
  block_shutdown_signals();
  try {
    const std::string token = load_token(token_file);
    // "-mcpu=native", the default, is this host's CPU, named: results and records never say "native".
    target = driver::concrete_target(target.empty() ? "llvm -mcpu=native" : target);
    // Refuses, now, a target no back end serves or this host cannot run: a misconfigured runner
    // must not register and fail every measurement.
    check_target_runs(target);

    MeasurePoolOptions pool_options;
    pool_options.build_workers = build_workers;
    pool_options.memory_limit_bytes = memory_limit_mb << 20;
    pool_options.extension = extension;
    pool_options.target = target;
    pool_options.kiln_version = deploy::version();
    MetricsRegistry metrics;
    add_process_metrics(metrics, "runner", deploy::version());
    RunnerMetrics runner_metrics(metrics);
    runner_metrics.hook(pool_options);
    MeasurePool pool(pool_options);
    runner_metrics.watch(metrics, pool);

    // What the tracker said when it refused the runner's credentials (RunnerAgentOptions).
    std::mutex refused_mutex;
    std::string refused;
    std::unique_ptr<RunnerAgent> agent;
    RunnerServiceOptions service_options;
    service_options.token = token;
    service_options.accept_lease = [&agent](const std::string &lease) { return agent && agent->holds_lease(lease); };
    service_options.runner_id = [&agent] { return agent ? agent->runner_id() : std::string(); };
    RunnerIdentity identity(key, target);
    if (target.rfind("cuda", 0) == 0) identity.gpu = gpu_device(cuda_device_info(*load_cuda_driver()));
    const ops::Registry registry = extended_registry(extension);
    for (const std::string &name : registry.names()) {
      identity.templates.emplace_back(name, registry.get(name)->version);
    }
    RunnerService service(identity, &pool, service_options);

    ServiceHostOptions host_options;
    host_options.tls = tls;
    auto host = ServiceHost::start(listen, {&service}, host_options);
    if (advertise.empty()) advertise = host->address();
    std::unique_ptr<MetricsServer> metrics_server;
    if (!metrics_listen.empty()) metrics_server = MetricsServer::start(metrics_listen, metrics);

    RunnerAgentOptions agent_options;
    agent_options.tracker = {tracker, token, tls};
    agent_options.advertise_address = advertise;
    agent_options.target.set_target(target);
    agent_options.target.set_device_key(key);
    agent_options.active_lease = [&service] { return service.active_lease(); };
    agent_options.events = &log;
    // A tracker that refuses the runner's credentials ends the runner: the main thread wakes up
    // as for a shutdown signal and exits with the message.
    agent_options.on_refused = [&refused_mutex, &refused](const std::string &message) {
      {
        std::lock_guard<std::mutex> lock(refused_mutex);
        refused = message;
      }
      ::kill(::getpid(), SIGTERM);
    };
    agent = std::make_unique<RunnerAgent>(agent_options);

    log.info("serving",
             {{"version", deploy::version()}, {"device_key", key}, {"target", target}, {"address", host->address()}});
    if (metrics_server) {
      log.info("metrics_serving", {{"address", metrics_server->address()}});
      std::cout << "metrics listening on " << metrics_server->address() << std::endl;
    }
    if (!address_file.empty()) write_file_atomically(address_file, host->address() + "\n");

    int signal = wait_for_shutdown_signal();
    std::string refused_message;
    {
      std::lock_guard<std::mutex> lock(refused_mutex);
      refused_message = refused;
    }
    if (refused_message.empty()) log.info("shutting_down", {{"signal", std::string(strsignal(signal))}});
    if (metrics_server) metrics_server->stop();
    agent->stop();
    host->shutdown(std::chrono::seconds(2));
    host->wait();
    agent.reset();
    if (!refused_message.empty()) {
      log.error("refused_by_tracker", {{"error", refused_message}});
      return 1;
    }
    log.info("stopped");
  } catch (const std::exception &e) {
    log.error("fatal", {{"error", std::string(e.what())}});
    return 1;
  }
  return 0;
}

}  // namespace kiln::rpc
