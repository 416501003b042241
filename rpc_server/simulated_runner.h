#pragma once
// SimulatedRunner: a stand-in runner for the farm's tests and benchmarks ONLY. It registers with a
// tracker and serves the Runner service exactly as kiln-runner does (the same RunnerService,
// session protocol, lease checks and RunnerAgent heartbeats), but compiles and runs nothing: each
// config is answered OK after `measure_time` with a made-up cost. Many of them fit in one process,
// so a load test can put a hundred runners behind one tracker on loopback.
//
// It lives in its own library, kiln_simulated_runner, which only tests and benchmarks link;
// kiln-runner has no flag or code path that reaches it, so a production farm cannot measure
// fake costs by accident.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rpc_server/farm_client.h"

namespace kiln::rpc {

struct SimulatedRunnerOptions {
  // The tracker (address, token, TLS); the runner's own service uses the same TLS files.
  Endpoint tracker;
  std::string device_key;
  std::string target = "llvm -mcpu=native";
  // How long each config of a batch takes.
  std::chrono::milliseconds measure_time{5};
  std::string listen = "127.0.0.1:0";
};

class SimulatedRunner {
 public:
  // Serves at once and registers in the background (wait_registered()).
  explicit SimulatedRunner(SimulatedRunnerOptions options);
  // Stops heartbeating and serving.
  ~SimulatedRunner();
  SimulatedRunner(const SimulatedRunner &) = delete;
  SimulatedRunner &operator=(const SimulatedRunner &) = delete;

  const std::string &address() const;
  bool wait_registered(std::chrono::milliseconds timeout);
  // Configs answered so far (cancelled ones not counted).
  int64_t measured() const;

  // The cost it reports for a config: 1 to 2 ms, fixed per knobs text, so that a search sees a
  // landscape that does not change between runs.
  static double simulated_cost(const std::string &knobs_json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::rpc
