// bench/farm: the device farm under load. A kiln-tracker runs in its own process on loopback;
// R simulated runners (rpc_server/simulated_runner.h: the real Runner service, session protocol
// and tracker heartbeats, but each config answered after --measure-ms without compiling) run in
// this process; C clients (one thread each, as jobs of a tuning service) loop acquire -> measure
// a batch -> release through the tracker for --seconds. What is measured is the farm's machinery:
// trials per second against the ideal (every runner measuring all the time: R x 1000 /
// measure_ms, the peer computed in the same run), the latency of Acquire, and the tracker's CPU
// time (utime + stime from /proc/PID/stat) over the measured window.
//
// Usage: farm_load_bench [--runners 10,25,50,100] [--clients-per-runner 1] [--batch 16]
//                        [--measure-ms 10] [--seconds 5]
// Prints one line per runner count:
//   farm_load runners=R clients=C batch=B measure_ms=M wall_s= trials= trials_per_s=
//             ideal_trials_per_s= efficiency= lease_p50_ms= lease_p99_ms= tracker_cpu_s=
//             tracker_cpu_pct= errors=
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "bench/common/split_list.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/simulated_runner.h"
#include "tests/rpc_server/child_process.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace rpc = kiln::rpc;

constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kToken[] = "farm-load-bench-token";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// utime + stime of a process, seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (in parentheses, which may hold spaces): state is field 3,
  // utime 14 and stime 15.
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::atof(field.c_str());
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
  return values[i];
}

struct Config {
  int clients_per_runner = 1;
  int batch = 16;
  int measure_ms = 10;
  double seconds = 5;
};

int free_runners(const rpc::Endpoint &tracker, const std::string &key) {
  try {
    const kiln::v1::SummaryReply reply = rpc::TrackerClient(tracker).summary();
    for (const auto &d : reply.devices()) {
      if (d.device_key() == key) return static_cast<int>(d.free_runners());
    }
  } catch (const rpc::FarmError &) {
  }
  return 0;
}

void run(const rpc::Endpoint &tracker, pid_t tracker_pid, int runners, const Config &config) {
  const std::string key = "sim-" + std::to_string(runners);
  std::vector<std::unique_ptr<rpc::SimulatedRunner>> farm;
  for (int i = 0; i < runners; ++i) {
    rpc::SimulatedRunnerOptions o;
    o.tracker = tracker;
    o.device_key = key;
    o.target = kTarget;
    o.measure_time = std::chrono::milliseconds(config.measure_ms);
    farm.push_back(std::make_unique<rpc::SimulatedRunner>(o));
  }
  for (auto until = Clock::now() + 60s; free_runners(tracker, key) < runners && Clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
  }

  kiln::v1::Workload workload;
  workload.set_template_name("simulated");
  workload.set_args_json("{}");
  kiln::v1::Target target;
  target.set_target(kTarget);
  target.set_device_key(key);
  std::vector<kiln::v1::Config> configs(static_cast<size_t>(config.batch));
  for (size_t i = 0; i < configs.size(); ++i) {
    configs[i].set_index(static_cast<int64_t>(i));
    configs[i].set_knobs_json("[[\"k\"," + std::to_string(i) + "]]");
  }
  kiln::v1::MeasureOptions options;
  options.set_repeat(3);

  const int clients = runners * config.clients_per_runner;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> trials{0}, errors{0};
  std::mutex latency_mutex;
  std::vector<double> latencies_ms;
  const double cpu_before = cpu_seconds(tracker_pid);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      rpc::TrackerClient client(tracker);
      std::vector<double> mine;
      while (!stop.load()) {
        try {
          const Clock::time_point asked = Clock::now();
          const kiln::v1::AcquireReply lease = client.acquire(key, 0, 30s);
          mine.push_back(1e3 * seconds_since(asked));
          int64_t ok = 0;
          {
            rpc::RunnerSession session(lease, tracker.token, tracker.tls, options);
            for (const auto &result : session.measure(workload, target, configs)) {
              ok += result.error() == kiln::v1::OK ? 1 : 0;
            }
            if (!session.broken()) session.close();
          }
          client.release(lease.lease_id());
          trials += ok;
          errors += config.batch - ok;
        } catch (const rpc::FarmError &) {
          errors += 1;
        }
      }
      std::lock_guard<std::mutex> lock(latency_mutex);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(config.seconds));
  stop = true;
  const int64_t counted = trials.load();
  const double wall = seconds_since(start);
  const double cpu = cpu_seconds(tracker_pid) - cpu_before;
  for (std::thread &t : threads) t.join();

  const double ideal = runners * 1000.0 / config.measure_ms;
  std::printf(
      "farm_load runners=%d clients=%d batch=%d measure_ms=%d wall_s=%.2f trials=%lld trials_per_s=%.0f "
      "ideal_trials_per_s=%.0f efficiency=%.3f lease_p50_ms=%.2f lease_p99_ms=%.2f tracker_cpu_s=%.2f "
      "tracker_cpu_pct=%.1f errors=%lld\n",
      runners, clients, config.batch, config.measure_ms, wall, static_cast<long long>(counted), counted / wall, ideal,
      counted / wall / ideal, percentile(latencies_ms, 0.5), percentile(latencies_ms, 0.99), cpu, 100 * cpu / wall,
      static_cast<long long>(errors.load()));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<int> runner_counts = {10, 25, 50, 100};
  Config config;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool value = i + 1 < argc;
    if (arg == "--runners" && value) {
      runner_counts.clear();
      for (const std::string &n : kiln::bench::split_list(argv[++i])) runner_counts.push_back(std::atoi(n.c_str()));
    } else if (arg == "--clients-per-runner" && value) {
      config.clients_per_runner = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--batch" && value) {
      config.batch = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--measure-ms" && value) {
      config.measure_ms = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--seconds" && value) {
      config.seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: farm_load_bench [--runners 10,25,50,100] [--clients-per-runner 1] [--batch 16] "
                   "[--measure-ms 10] [--seconds 5]\n");
      return 2;
    }
  }

  char pattern[] = "/tmp/kiln-farm-load-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  std::ofstream(dir / "token") << kToken << "\n";
  kiln::testing::ChildProcess tracker({KILN_TRACKER_BINARY, "--listen", "127.0.0.1:0", "--token-file",
                                       (dir / "token").string(), "--address-file", (dir / "tracker.address").string()},
                                      (dir / "tracker.log").string());
  std::string address;
  for (int i = 0; i < 3000 && address.empty() && tracker.running(); ++i) {
    std::ifstream(dir / "tracker.address") >> address;
    if (address.empty()) std::this_thread::sleep_for(10ms);
  }
  if (address.empty()) {
    std::fprintf(stderr, "farm_load_bench: the tracker did not start:\n%s\n", tracker.log().c_str());
    return 1;
  }
  const rpc::Endpoint endpoint{address, kToken, {}};
  for (int runners : runner_counts) run(endpoint, tracker.pid(), runners, config);
  tracker.signal(SIGTERM);
  tracker.wait_for(10s);
  fs::remove_all(dir);
  return 0;
}
