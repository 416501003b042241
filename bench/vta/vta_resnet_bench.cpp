// ResNet-18's convolutions C2-C11 through the VTA compiler path (conv2d_nchw_int8.vta, the VTA
// code generator, the simulator's cycle model), at full size with the reference benchmark's
// epilogue (>> 8, + bias, clip to int8). For each layer: the default config; the best of a small
// random search over configs without virtual threads and over configs with them (the default
// config is in both searches where it qualifies); and the best of a real tuning job (tuner::Tuner
// with the model-based strategy and the local measurer: worker processes, the VTA back end, the
// bit-exact check against the CPU reference) with a budget of --tune-trials per layer. Prints GOPS
// at the modelled clock and GEMM-core utilisation (useful GEMM cycles over total cycles), beside
// the reference design's published figures (TVM, OSDI'18: utilisation 70% -> 88% with latency
// hiding).
//
//   vta_resnet_bench [--trials N] [--tune-trials N] [--strategy S] [--layers C2,C6] [--seed S]
//                    [--model NAME] [--log PATH]
//
// --tune-trials 0 skips the tuning jobs; --log keeps the tuning log (a temporary file otherwise).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/vta/resnet_layers.h"
#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "rpc_server/measure_worker.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

using namespace kiln;
using contracts::Json;

namespace {

using bench::kResnet18Layers;
using Layer = bench::VtaConvLayer;

struct Result {
  bool ok = false;
  uint64_t cycles = 0;
  double gops = 0, util = 0;
  std::string config;
  kiln::vta::SimCounters counters;
};

Result measure(const ops::Task &task, const autotune::Config &cfg, const kiln::vta::VtaConfig &vc,
               std::vector<std::vector<uint8_t>> &bufs) {
  Result r;
  r.config = cfg.to_string();
  try {
    const ir::LoweredFunc f = task.lower(cfg, "conv");
    codegen::vta::VtaProgram program(f, vc);
    kiln::vta::Runtime rt(vc);
    std::vector<codegen::vta::HostArg> host;
    for (auto &b : bufs) host.push_back({b.data(), b.size()});
    const kiln::vta::SimCounters c = program.run_host(rt, host);
    r.ok = true;
    r.cycles = c.total_cycles;
    r.gops = task.flop() / (static_cast<double>(c.total_cycles) / (vc.clock_mhz * 1e6)) / 1e9;
    r.util = c.gemm_utilization();
    r.counters = c;
  } catch (const std::exception &e) {
    r.config += std::string(" (") + e.what() + ")";
  }
  return r;
}

void print(const char *what, const Result &r) {
  if (!r.ok) {
    std::printf("  %-22s failed: %s\n", what, r.config.c_str());
    return;
  }
  const kiln::vta::SimCounters &c = r.counters;
  std::printf(
      "  %-24s %9llu cycles %6.2f GOPS util %.2f  busy load %llu compute %llu (gemm %llu alu %llu) store "
      "%llu, uop loads %llu B  %s\n",
      what, static_cast<unsigned long long>(r.cycles), r.gops, r.util,
      static_cast<unsigned long long>(c.load_busy_cycles), static_cast<unsigned long long>(c.compute_busy_cycles),
      static_cast<unsigned long long>(c.gemm_cycles), static_cast<unsigned long long>(c.alu_cycles),
      static_cast<unsigned long long>(c.store_busy_cycles), static_cast<unsigned long long>(c.uop_load_nbytes),
      r.config.c_str());
}

constexpr char kDeviceKey[] = "vta-sim";

// The best config of a tuning job of `task` (budget `trials`), or nullopt when it found none.
std::optional<autotune::Config> tune(db::TuningDb &log, tuner::Measurer &measurer, const std::string &target,
                                     const ops::Task &task, const std::string &name, const contracts::Json &args,
                                     const std::string &strategy, int64_t trials, uint64_t seed,
                                     tuner::JobStatus *status) {
  tuner::Tuner tuner(log, measurer, target, kDeviceKey);
  tuner::TuneOptions o;
  o.strategy = strategy;
  o.trials = trials;
  o.batch_size = 16;
  o.transfer = false;
  o.seed = seed;
  const int64_t job = tuner.create_job("vta " + name, {{"conv2d_nchw_int8.vta", args, 1, name}}, o);
  *status = tuner.run(job);
  db::ExportFilter filter;
  filter.workload_key = task.key();
  std::optional<autotune::Config> best;
  double best_s = 0;
  log.for_each_record(filter, [&](const db::Record &rec) {
    if (!rec.job_id || *rec.job_id != job || !rec.valid()) return;
    if (!best || rec.mean() < best_s) {
      best_s = rec.mean();
      best = task.space().from_record(rec.config);
    }
  });
  return best;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return rpc::measure_worker_main();
  int trials = 8;
  int64_t tune_trials = 64;
  std::string strategy = "xgb";
  std::string log_path;
  uint64_t seed = 1;
  std::string model = "sim_1x16_i8w8a32";
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc) {
      trials = std::stoi(argv[++i]);
    } else if (a == "--tune-trials" && i + 1 < argc) {
      tune_trials = std::stoll(argv[++i]);
    } else if (a == "--strategy" && i + 1 < argc) {
      strategy = argv[++i];
    } else if (a == "--log" && i + 1 < argc) {
      log_path = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--layers" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string l; std::getline(ss, l, ',');) only.insert(l);
    } else {
      std::fprintf(stderr,
                   "usage: vta_resnet_bench [--trials N] [--tune-trials N] [--strategy S] [--layers C2,C6] [--seed S] "
                   "[--model NAME] [--log PATH]\n");
      return 1;
    }
  }
  const kiln::vta::VtaConfig vc = kiln::vta::VtaConfig::parse(model);
  const std::string target = "vta -model=" + model;
  std::printf(
      "ResNet-18 C2-C11 on VTA %s at %.0f MHz (peak %.1f GOPS), %d random configs per search, tuning jobs of "
      "%lld trials (%s)\n",
      model.c_str(), vc.clock_mhz, vc.peak_gops(), trials, static_cast<long long>(tune_trials), strategy.c_str());
  std::printf(
      "reference design (OSDI'18): GEMM utilisation 70%% -> 88%% with latency hiding; 102.4 GOPS peak at "
      "200 MHz\n\n");
  std::printf("%-4s %9s %9s %9s %9s | %6s %6s %6s %6s | %7s\n", "", "default", "no-vt", "vt", "tuned", "util-d",
              "util-1", "util-2", "util-t", "tuned/d");
  const bool keep_log = !log_path.empty();
  if (!keep_log) {
    log_path =
        (std::filesystem::temp_directory_path() / ("kiln_vta_resnet_bench_" + std::to_string(::getpid()) + ".db"))
            .string();
  }
  std::optional<db::TuningDb> log;
  std::unique_ptr<tuner::LocalMeasurer> measurer;
  if (tune_trials > 0) {
    log.emplace(db::TuningDb::open(log_path));
    tuner::LocalMeasurerOptions lo;
    lo.measure.set_threads(1);
    lo.build_workers = 1;
    measurer = std::make_unique<tuner::LocalMeasurer>(target, lo);
  }
  struct Row {
    std::string name;
    Result def, one, two, tuned;
    tuner::JobStatus job;
  };
  std::vector<Row> rows;
  for (const Layer &l : kResnet18Layers) {
    if (!only.empty() && !only.count(l.name)) continue;
    const Json args = bench::vta_conv_args(l, l.h);
    const ops::Task task("conv2d_nchw_int8.vta", args, ops::Target(contracts::Target::parse(target), 128));
    const int64_t oh = (l.h + 2 * l.pad - l.k) / l.stride + 1;
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<std::vector<uint8_t>> bufs = {std::vector<uint8_t>(l.ic * l.h * l.h),
                                              std::vector<uint8_t>(l.oc * l.ic * l.k * l.k),
                                              std::vector<uint8_t>(l.oc * 4, 0), std::vector<uint8_t>(l.oc * oh * oh)};
    for (int b = 0; b < 2; ++b)
      for (auto &x : bufs[b]) x = static_cast<uint8_t>(rng());
    Row row;
    row.name = l.name;
    const autotune::Config def = task.default_config();
    row.def = measure(task, def, vc, bufs);
    std::mt19937_64 crng(seed);
    auto threads = [](const autotune::Config &c) { return c.choice_int("oc_nthread") * c.choice_int("h_nthread"); };
    auto search = [&](bool with_threads) {
      Result best;
      if ((threads(def) > 1) == with_threads) best = row.def;
      std::set<int64_t> seen;
      for (int t = 0, tries = 0; t < trials && tries < 100 * trials; ++tries) {
        const autotune::Config c = task.space().sample(crng);
        if ((threads(c) > 1) != with_threads || !seen.insert(c.index()).second) continue;
        ++t;
        const Result r = measure(task, c, vc, bufs);
        if (r.ok && (!best.ok || r.cycles < best.cycles)) best = r;
      }
      return best;
    };
    row.one = search(false);
    row.two = search(true);
    if (measurer) {
      const std::optional<autotune::Config> best =
          tune(*log, *measurer, target, task, l.name, args, strategy, tune_trials, seed, &row.job);
      if (best) row.tuned = measure(task, *best, vc, bufs);
    }
    std::printf("%-4s %9.2f %9.2f %9.2f %9.2f | %6.2f %6.2f %6.2f %6.2f | %6.2fx\n", l.name, row.def.gops, row.one.gops,
                row.two.gops, row.tuned.gops, row.def.util, row.one.util, row.two.util, row.tuned.util,
                row.def.ok && row.tuned.ok ? static_cast<double>(row.def.cycles) / row.tuned.cycles : 0.0);
    std::fflush(stdout);
    rows.push_back(row);
  }
  std::printf(
      "\nGOPS at the modelled clock; util: useful GEMM cycles / total cycles; no-vt / vt: the best of the\n"
      "random search without / with virtual threads; tuned: the best of the layer's tuning job; tuned/d: the\n"
      "default's cycles over the tuned config's.\n\n");
  for (const Row &r : rows) {
    std::printf("%s\n", r.name.c_str());
    print("default", r.def);
    print("best, no virtual threads", r.one);
    print("best, virtual threads", r.two);
    if (measurer) {
      print("tuned", r.tuned);
      if (!r.job.tasks.empty()) {
        const tuner::TaskStatus &t = r.job.tasks.front();
        std::printf("  %-24s %lld trials, %lld valid, %.1f s\n", "tuning job", static_cast<long long>(t.trials),
                    static_cast<long long>(t.valid), r.job.elapsed_s);
      }
    }
  }
  if (log && !keep_log) {
    log.reset();
    std::error_code ec;
    for (const char *suffix : {"", "-wal", "-shm"}) std::filesystem::remove(log_path + suffix, ec);
  }
  return 0;
}
