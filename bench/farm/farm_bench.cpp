// bench/farm: what the device farm adds to each tuning trial. A kiln-tracker and kiln-runner
// daemons run in their own processes on loopback; a tuner (the farm client library) measures
// trials of a trivial kernel through them, batch after batch (acquire -> stream -> release per
// batch). The peer, measured in the same run, is the same trials compiled and timed directly in
// this process (lower, JIT-compile, one warm-up call and the timed calls): the farm's overhead
// per trial is the difference in wall time, divided by the trials.
//
// Usage: farm_bench [--trials N] [--batch B] [--runners R ...]
// Prints one line per runner count:
//   farm runners=R trials=N batch=B wall_s= trials_per_s= per_trial_ms= reported_compile_ms=
//        reported_run_ms= overhead_per_trial_ms= peer=in_process peer_per_trial_ms=
//        overhead_vs_peer_ms= ratio=
// overhead_per_trial_ms is each runner's share of the wall time less the compile and kernel time
// the runners reported; overhead_vs_peer_ms is the farm's time per trial less the peer's (the
// fair comparison with one runner; with more runners than cores, builds slow each other down).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "contracts/json.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/op.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "deploy/tensor.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/wire.h"
#include "tests/rpc_server/child_process.h"

namespace {

using namespace std::chrono_literals;
using kiln::contracts::Json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr char kKey[] = "bench-cpu";
constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kToken[] = "farm-bench-token";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Trials {
  std::unique_ptr<kiln::ops::Task> task;
  kiln::v1::Workload workload;
  std::vector<kiln::autotune::Config> configs;
  std::vector<kiln::v1::Config> wire;
};

// A trivial kernel: out = relu(x) on 256 floats, every config of its space in turn.
Trials make_trials(size_t n) {
  Trials t;
  Json args = Json::object(
      {{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{256})}, {"dtype", "float32"}})},
       {"epilogue", Json::array({Json::object({{"op", "relu"}})})}});
  t.task = std::make_unique<kiln::ops::Task>("elemwise.x86", args, kiln::driver::resolve_target(kTarget));
  t.workload = kiln::rpc::workload_to_proto(t.task->workload());
  std::vector<kiln::autotune::Config> all = t.task->space().enumerate(64);
  for (size_t i = 0; i < n; ++i) {
    const kiln::autotune::Config &c = all[i % all.size()];
    t.configs.push_back(c);
    t.wire.push_back(kiln::rpc::config_to_proto(c));
  }
  return t;
}

kiln::v1::MeasureOptions bench_options() {
  kiln::v1::MeasureOptions options;
  options.set_number(1);
  options.set_repeat(1);
  options.set_min_repeat_ms(0);
  options.set_threads(1);
  options.set_check_correctness(false);  // the peer does not check either
  return options;
}

// The same work as one trial, in this process.
double in_process_seconds(const Trials &t) {
  Clock::time_point start = Clock::now();
  kiln::codegen::LLVMBuildOptions build;
  build.target = kTarget;
  for (const kiln::autotune::Config &cfg : t.configs) {
    kiln::ops::Compute compute = t.task->compute(cfg);
    std::vector<kiln::deploy::Tensor> tensors;
    for (const auto &tensor : compute.args()) {
      std::vector<int64_t> shape;
      for (const auto &e : tensor.shape()) shape.push_back(kiln::ir::as_const_int(e).value());
      tensors.push_back(kiln::deploy::Tensor::empty(shape, kiln::deploy::DType::of<float>()));
    }
    kiln::ir::LoweredFunc f = t.task->lower(cfg, "trial");
    kiln::codegen::LLVMModule module(f, build);
    module.call("trial", tensors);  // warm-up
    Clock::time_point timed = Clock::now();
    module.call("trial", tensors);
    (void)seconds_since(timed);
  }
  return seconds_since(start);
}

class Farm {
 public:
  Farm(int runners, const fs::path &dir) : dir_(dir) {
    std::ofstream(dir_ / "token") << kToken << "\n";
    tracker_ = std::make_unique<kiln::testing::ChildProcess>(
        std::vector<std::string>{KILN_TRACKER_BINARY, "--listen", "127.0.0.1:0", "--token-file",
                                 (dir_ / "token").string(), "--address-file", (dir_ / "tracker.address").string()},
        (dir_ / "tracker.log").string());
    tracker_address_ = read(dir_ / "tracker.address");
    for (int i = 0; i < runners; ++i) {
      fs::path file = dir_ / ("runner" + std::to_string(i) + ".address");
      runners_.push_back(std::make_unique<kiln::testing::ChildProcess>(
          std::vector<std::string>{KILN_RUNNER_BINARY, "--tracker", tracker_address_, "--key", kKey, "--target",
                                   kTarget, "--token-file", (dir_ / "token").string(), "--address-file", file.string(),
                                   "--build-workers", "1"},
          (dir_ / ("runner" + std::to_string(i) + ".log")).string()));
      read(file);
    }
    kiln::rpc::TrackerClient tracker(endpoint());
    for (int i = 0; i < 1000; ++i) {
      auto summary = tracker.summary();
      if (summary.devices_size() == 1 && summary.devices(0).free_runners() == static_cast<uint32_t>(runners)) return;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("the runners did not register");
  }
  kiln::rpc::Endpoint endpoint() const { return {tracker_address_, kToken, {}}; }

 private:
  static std::string read(const fs::path &file) {
    for (int i = 0; i < 3000; ++i) {
      std::ifstream in(file);
      std::string text;
      if (in >> text) return text;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("no address in " + file.string());
  }
  fs::path dir_;
  std::unique_ptr<kiln::testing::ChildProcess> tracker_;
  std::string tracker_address_;
  std::vector<std::unique_ptr<kiln::testing::ChildProcess>> runners_;
};

struct FarmRun {
  double wall = 0;
  // What the runners reported: compile time and time spent calling the kernel (warm-up and the
  // timed calls), summed over the trials.
  double compile = 0;
  double run = 0;
};

// Measures `t` through the farm with `tuners` tuners at once, each taking an equal share of the
// trials, batch after batch.
FarmRun farm_seconds(const Farm &farm, const Trials &t, size_t batch, int tuners) {
  kiln::v1::Target target;
  target.set_target(kTarget);
  target.set_device_key(kKey);
  Clock::time_point start = Clock::now();
  std::vector<std::future<FarmRun>> parts;
  for (int k = 0; k < tuners; ++k) {
    parts.push_back(std::async(std::launch::async, [&, k] {
      kiln::rpc::FarmClientOptions options;
      options.tracker = farm.endpoint();
      kiln::rpc::FarmClient client(options);
      FarmRun sums;
      const size_t first = t.wire.size() * k / tuners, last = t.wire.size() * (k + 1) / tuners;
      for (size_t begin = first; begin < last; begin += batch) {
        std::vector<kiln::v1::Config> part(t.wire.begin() + begin, t.wire.begin() + std::min(last, begin + batch));
        for (const auto &r : client.measure(t.workload, target, part, bench_options())) {
          if (r.error() != kiln::v1::OK) continue;
          sums.wall += 1;  // counts successes here
          sums.compile += r.compile_seconds();
          // number = 1: one warm-up call and one call per repeat.
          for (double s : r.seconds()) sums.run += s;
          if (r.seconds_size() > 0) sums.run += r.seconds(0);
        }
      }
      return sums;
    }));
  }
  FarmRun run;
  double ok = 0;
  for (auto &p : parts) {
    FarmRun part = p.get();
    ok += part.wall;
    run.compile += part.compile;
    run.run += part.run;
  }
  run.wall = seconds_since(start);
  if (ok != static_cast<double>(t.wire.size())) {
    std::fprintf(stderr, "farm_bench: only %.0f of %zu trials succeeded\n", ok, t.wire.size());
    std::exit(1);
  }
  return run;
}

}  // namespace

int main(int argc, char **argv) {
  size_t trials = 300, batch = 50;
  std::vector<int> runner_counts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc) {
      trials = std::stoul(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::stoul(argv[++i]);
    } else if (a == "--runners" && i + 1 < argc) {
      runner_counts.push_back(std::stoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: farm_bench [--trials N] [--batch B] [--runners R ...]\n");
      return 2;
    }
  }
  if (runner_counts.empty()) runner_counts = {1, 3};
  char pattern[] = "/tmp/kiln-farm-bench-XXXXXX";
  fs::path dir = mkdtemp(pattern);
  Trials t = make_trials(trials);
  in_process_seconds(make_trials(10));  // warm the JIT and the code paths
  for (int runners : runner_counts) {
    fs::path sub = dir / ("r" + std::to_string(runners));
    fs::create_directories(sub);
    Farm farm(runners, sub);
    farm_seconds(farm, make_trials(std::min<size_t>(trials, 2 * batch)), batch, runners);  // warm-up
    // Peer and farm interleaved, twice, best of each: the machine is shared.
    double peer = 1e30;
    FarmRun best;
    best.wall = 1e30;
    for (int round = 0; round < 2; ++round) {
      peer = std::min(peer, in_process_seconds(t));
      FarmRun run = farm_seconds(farm, t, batch, runners);
      if (run.wall < best.wall) best = run;
    }
    const double n = static_cast<double>(trials), wall = best.wall;
    // Two views of the overhead per trial. Against the peer (meaningful with one runner: with R
    // runners on fewer cores than R the builds slow each other down): the farm's time per trial
    // less the peer's. Against what the runners reported: each runner's share of the wall time
    // less the compile and kernel time it reported for its trials.
    const double vs_peer_ms = (wall - peer) / n * 1e3;
    const double vs_reported_ms = (wall * runners - best.compile - best.run) / n * 1e3;
    std::printf(
        "farm runners=%d trials=%zu batch=%zu wall_s=%.3f trials_per_s=%.1f per_trial_ms=%.3f "
        "reported_compile_ms=%.3f reported_run_ms=%.3f overhead_per_trial_ms=%.3f peer=in_process "
        "peer_per_trial_ms=%.3f overhead_vs_peer_ms=%.3f ratio=%.3f\n",
        runners, trials, batch, wall, n / wall, wall / n * 1e3, best.compile / n * 1e3, best.run / n * 1e3,
        vs_reported_ms, peer / n * 1e3, vs_peer_ms, wall / peer);
    std::fflush(stdout);
  }
  fs::remove_all(dir);
  return 0;
}
