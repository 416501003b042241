#pragma once
// RunnerService: the gRPC Runner service of a device runner (kiln.v1.Runner).
//
// Info describes the runner. Measure is a session: its first request names the tracker lease
// the caller holds and the measure options, every later request is a batch of configs of one
// workload, and one reply goes back per config as soon as it is measured. Candidates are
// compiled and timed by the runner's MeasurePool in worker processes; this service only checks
// requests and moves messages. One session at a time: a runner is one device (a new session
// waits up to a second for one its client has just cancelled to wind down).
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/v1/runner.grpc.pb.h"

namespace kiln::rpc {

class MeasurePool;
struct Candidate;
struct MeasureRejection;

// How a batch is measured: MeasurePool::measure's contract (one on_result per candidate, or a
// rejection; INFRA "cancelled" once *cancel is set).
using MeasureBatch = std::function<std::optional<MeasureRejection>(
    const std::vector<Candidate> &batch, const kiln::v1::MeasureOptions &options,
    const std::function<void(size_t, const kiln::v1::MeasureResult &)> &on_result, const std::atomic<bool> *cancel)>;

// What a runner says about itself.
struct RunnerIdentity {
  RunnerIdentity(std::string device_key, std::string target, std::vector<std::string> cpu_features = {})
      : device_key(std::move(device_key)), target(std::move(target)), cpu_features(std::move(cpu_features)) {}

  // The class of identical devices, for example "x86-znver4".
  std::string device_key;
  // The target string, for example "llvm -mcpu=znver4"; the service describes itself with its
  // concrete form ("-mcpu=native" resolved to this host's CPU).
  std::string target;
  // CPU features reported by Info; host_cpu_features() when left empty.
  std::vector<std::string> cpu_features;
  // The templates it measures: name and version.
  std::vector<std::pair<std::string, int>> templates;
  // The GPU of a CUDA runner, reported by Info.
  std::optional<kiln::v1::GpuDevice> gpu;
};

// The features of this machine's CPU that matter to code generation, for example "avx2", "fma".
std::vector<std::string> host_cpu_features();

struct RunnerServiceOptions {
  // The farm's shared token, required on every call. Empty accepts calls without one (only for
  // in-process tests of Info).
  std::string token;
  // Decides whether a session may run under a lease: true when the lease is the one the tracker
  // gave this runner. Unset accepts any lease (a runner without a tracker).
  std::function<bool(const std::string &lease_id)> accept_lease;
  // The runner id to stamp on results (it changes when the runner registers again).
  std::function<std::string()> runner_id;
  // The most configs one batch may carry.
  uint32_t max_batch = 4096;
  // Measures batches instead of the pool. Only for tests and benchmarks (a simulated runner,
  // rpc_server/simulated_runner.h); the runner daemon never sets it.
  MeasureBatch measure_batch;
};

class RunnerService final : public kiln::v1::Runner::Service {
 public:
  // `pool` (may be null: Measure then answers UNIMPLEMENTED unless options.measure_batch is set)
  // must outlive the service.
  RunnerService(RunnerIdentity identity, MeasurePool *pool = nullptr, RunnerServiceOptions options = {});

  grpc::Status Info(grpc::ServerContext *context, const kiln::v1::InfoRequest *request,
                    kiln::v1::InfoReply *reply) override;
  grpc::Status Measure(grpc::ServerContext *context,
                       grpc::ServerReaderWriter<kiln::v1::MeasureReply, kiln::v1::MeasureRequest> *stream) override;

  // The lease of the open session, "" when none (reported in heartbeats).
  std::string active_lease() const;

 private:
  grpc::Status run_session(grpc::ServerContext *context,
                           grpc::ServerReaderWriter<kiln::v1::MeasureReply, kiln::v1::MeasureRequest> *stream,
                           const kiln::v1::MeasureSession &session);

  RunnerIdentity identity_;
  MeasurePool *pool_;
  RunnerServiceOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable session_closed_;
  bool session_open_ = false;
  std::string active_lease_;
};

}  // namespace kiln::rpc
