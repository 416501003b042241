#include "rpc_server/runner_daemon.h"

#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "compiler/driver/target.h"
#include "deploy/version.h"
#include "rpc_server/credentials.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/runner_agent.h"
#include "rpc_server/runner_service.h"
#include "rpc_server/service_host.h"
#include "rpc_server/signals.h"

namespace kiln::rpc {

int runner_daemon_main(int argc, char **argv, const MeasureExtension &extension) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") return measure_worker_main(extension);
  CLI::App app{"kiln-runner: compiles and times tuning candidates for a Kiln device farm.", "kiln-runner"};
  app.set_version_flag("--version", "kiln-runner " + deploy::version());
  std::string tracker, key, listen = "127.0.0.1:0", advertise, target, token_file, address_file;
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
  app.add_option("--memory-limit-mb", memory_limit_mb, "address-space limit of each worker process")
      ->capture_default_str()
      ->check(CLI::Range(64, 1 << 24));
  app.add_option("--address-file", address_file, "write the bound address to this file once serving");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

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
    MeasurePool pool(pool_options);

    // What the tracker said when it refused the runner's credentials (RunnerAgentOptions).
    std::mutex refused_mutex;
    std::string refused;
    std::unique_ptr<RunnerAgent> agent;
    RunnerServiceOptions service_options;
    service_options.token = token;
    service_options.accept_lease = [&agent](const std::string &lease) { return agent && agent->holds_lease(lease); };
    service_options.runner_id = [&agent] { return agent ? agent->runner_id() : std::string(); };
    RunnerIdentity identity(key, target);
    const ops::Registry registry = extended_registry(extension);
    for (const std::string &name : registry.names()) {
      identity.templates.emplace_back(name, registry.get(name)->version);
    }
    RunnerService service(identity, &pool, service_options);

    ServiceHostOptions host_options;
    host_options.tls = tls;
    auto host = ServiceHost::start(listen, {&service}, host_options);
    if (advertise.empty()) advertise = host->address();

    RunnerAgentOptions agent_options;
    agent_options.tracker = {tracker, token, tls};
    agent_options.advertise_address = advertise;
    agent_options.target.set_target(target);
    agent_options.target.set_device_key(key);
    agent_options.active_lease = [&service] { return service.active_lease(); };
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

    std::fprintf(stderr, "kiln-runner: serving %s (device key %s, target \"%s\") on %s\n", deploy::version().c_str(),
                 key.c_str(), target.c_str(), host->address().c_str());
    if (!address_file.empty()) write_file_atomically(address_file, host->address() + "\n");

    int signal = wait_for_shutdown_signal();
    std::string refused_message;
    {
      std::lock_guard<std::mutex> lock(refused_mutex);
      refused_message = refused;
    }
    if (refused_message.empty()) std::fprintf(stderr, "kiln-runner: %s, shutting down\n", strsignal(signal));
    agent->stop();
    host->shutdown(std::chrono::seconds(2));
    host->wait();
    agent.reset();
    if (!refused_message.empty()) {
      std::fprintf(stderr, "kiln-runner: %s\n", refused_message.c_str());
      return 1;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-runner: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace kiln::rpc
