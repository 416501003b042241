#pragma once
// MeasurePool: how a runner compiles and times tuning candidates. The runner process never runs a
// candidate itself: worker processes (fork+exec of a worker command, talking kiln.v1 worker
// messages over a socket, see worker.proto) compile and time them, so that a candidate that
// crashes, hangs or exhausts memory costs one worker, which is replaced, and one result.
//
// A batch is measured in rounds: every worker is given a few candidates to build (in parallel,
// up to build_workers at once); once all of them are built, the built ones run one at a time
// while no worker builds, so that nothing else of the runner competes for the CPU during a
// timing. A worker keeps, per workload, the parsed task, random inputs (seeded by the workload
// key) and the reference output, which a plain, unscheduled lowering of the same compute gives.
//
// Failures are results with their ErrorClass:
//   INSTANTIATION   unparsable, stale or foreign config; illegal schedule
//   COMPILE_HOST    the compiler failed, or the worker died while compiling (signal named)
//   BUILD_TIMEOUT   compiling took longer than build_timeout_ms (worker killed and replaced)
//   RUNTIME_DEVICE  the kernel failed, crashed (signal named) or ran out of memory
//   RUN_TIMEOUT     running took longer than run_timeout_ms (worker killed and replaced)
//   WRONG_ANSWER    the output of the warm-up call differs from the reference
//   INFRA           no worker could be started, or the measurement was cancelled
//   UNKNOWN         anything else
// Only the candidate a dying worker was working on is blamed; those it had built but not run yet
// are built again on its replacement.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/v1/measure.pb.h"
#include "kiln/v1/workload.pb.h"
#include "rpc_server/measure_extension.h"
#include "rpc_server/measure_worker.h"  // measure_worker_main, the workers' main()

namespace kiln::rpc {

struct Candidate {
  kiln::v1::Workload workload;
  kiln::v1::Target target;
  kiln::v1::Config config;
};

// Requests beyond these are refused as absurd (MeasureRejection::Reason::kOverLimit).
struct MeasureLimits {
  uint32_t max_batch = 4096;
  uint32_t max_number = 1000000;
  uint32_t max_repeat = 1000;
  uint32_t max_min_repeat_ms = 10000;
  uint32_t max_timeout_ms = 600000;
  uint32_t max_cooldown_ms = 60000;
  uint32_t max_threads = 1024;
  size_t max_json_bytes = 65536;
  uint64_t max_tensor_bytes = 4ull << 30;  // inputs and outputs of one workload
};

// A request the pool refuses as a whole, before measuring any of it. Either is the caller's
// mistake, which every runner would refuse alike.
struct MeasureRejection {
  enum class Reason {
    // Unparsable JSON, an unknown template, bad arguments, a workload key that does not match, a
    // candidate for a target other than the runner's.
    kMalformed,
    // Beyond the runner's MeasureLimits: options, batch size, JSON length, tensor bytes.
    kOverLimit,
  };

  // A message alone is a malformed request.
  MeasureRejection(std::string text, Reason why = Reason::kMalformed) : reason(why), message(std::move(text)) {}

  Reason reason;
  // One line naming the field, the config or the workload, and the limit where there is one.
  std::string message;
};

// nullopt when the options are acceptable, else a kOverLimit rejection naming the field.
std::optional<MeasureRejection> check_options(const kiln::v1::MeasureOptions &options, const MeasureLimits &limits);

// The options with zeros replaced by the runner's defaults: number 1, repeat 3, min_repeat_ms 10
// when absent (an explicit 0 turns the growth of `number` off),
// build_timeout_ms 10000, run_timeout_ms 10000 (all repeats of one candidate, the warm-up and the
// correctness check included), cooldown 0, cache flush off, check_correctness on when absent,
// threads one per physical core of the host.
kiln::v1::MeasureOptions with_defaults(kiln::v1::MeasureOptions options);

// One build or run as the pool saw it (from sending the request to the reply), for tests and
// diagnostics. Times are seconds of the steady clock.
struct MeasureTraceEvent {
  enum Kind { Build, Run };
  Kind kind = Build;
  size_t position = 0;  // in the batch
  int worker = 0;       // the worker slot
  double start = 0;
  double end = 0;
  // Seconds the worker reported it spent on the request (0 when it did not reply).
  double worker_seconds = 0;
};

struct MeasurePoolOptions {
  // The argv of a worker; the pool appends its own flags.
  std::vector<std::string> worker_command = {"/proc/self/exe", "--measure-worker"};
  // Parallel builds; 0: one per core (at least 1).
  int build_workers = 0;
  // RLIMIT_AS of each worker (none for a CUDA target: worker_address_space_limited).
  uint64_t memory_limit_bytes = 8ull << 30;
  // Templates and hooks beyond the builtin library; the workers started by worker_command must
  // have the same (see measure_extension.h).
  MeasureExtension extension;
  // The runner's target, e.g. "llvm -mcpu=znver4"; "-mcpu=native" is resolved to this host's CPU
  // (driver::concrete_target), which every result names. A candidate for another target is
  // refused; one for "llvm -mcpu=native" is this host's. Empty: "llvm -mcpu=native".
  std::string target;
  // Copied into every MeasureResult; an empty kiln_version is this build's version.
  std::string runner_id, kiln_version;
  MeasureLimits limits;
  // Called after every build and run, on the thread that reports results.
  std::function<void(const MeasureTraceEvent &)> trace;
  // Called with every result, just before the caller's on_result, on the same thread.
  std::function<void(const kiln::v1::MeasureResult &)> observe_result;
};

class MeasurePool {
 public:
  explicit MeasurePool(MeasurePoolOptions options);
  ~MeasurePool();  // kills and reaps every worker
  MeasurePool(const MeasurePool &) = delete;
  MeasurePool &operator=(const MeasurePool &) = delete;

  // Measures a batch. Returns nullopt after on_result(position, result) has been called exactly
  // once per candidate (in any order, never concurrently), or returns a rejection without calling
  // on_result at all when the request is malformed or absurd: options outside the limits, a batch
  // too big, JSON too long or unparsable arguments, an unknown template, bad arguments, a workload
  // key that does not match, a target not the runner's, tensors over max_tensor_bytes.
  // Per-config problems (a stale fingerprint, an illegal config) are INSTANTIATION results. When
  // *cancel becomes true, every candidate without a result is answered INFRA "cancelled" (a build
  // or run in progress is stopped by killing its worker) and measure returns within a few tens of
  // milliseconds. Concurrent calls are serialized (one device).
  //
  // Config.knobs_json is either an object {"knob": value, ...} or the list [["knob", value], ...];
  // with Config.space_fingerprint and Config.index (checked when not zero) it makes the config.
  std::optional<MeasureRejection> measure(const std::vector<Candidate> &batch, const kiln::v1::MeasureOptions &options,
                                          const std::function<void(size_t, const kiln::v1::MeasureResult &)> &on_result,
                                          const std::atomic<bool> *cancel = nullptr);

  // Worker processes spawned so far (a crashed or killed worker is replaced by a new one).
  int workers_started() const;
  // Of those, the ones that replaced a worker of the same slot (it crashed, hung, or was killed
  // for a timeout or a cancel).
  int worker_restarts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::rpc
