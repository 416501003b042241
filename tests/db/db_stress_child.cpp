// A helper process for the multi-process tests of the tuning log:
//   db_stress_child write <db> <writer> <records> <batch> <busy_timeout_ms>
//       inserts <records> records in batches; record k of writer w has runner "writer-<w>" and
//       config index w * 1,000,000 + k (each config is measured once: best() ranks a config by
//       the median of its records, so only then can a workload's best never get worse). Exits 0
//       when all are committed, 1 (with the error on stderr) otherwise.
//   db_stress_child read <db> <stop_file>
//       runs best() over the workloads of the writers until <stop_file> exists, checking that a
//       workload's best mean never gets worse; prints the number of lookups. Exits 0 or 1.
//   db_stress_child crash <db> <run> <batch>
//       inserts batches forever; batch b of run r is config indexes b*batch .. b*batch+batch-1
//       with runner "run-<r>". After each commit it prints "<b>\n" and flushes, so the parent
//       knows which batches were committed when it kills this process.
#include "db/tuning_db.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::db::Record;
using kiln::db::Target;
using kiln::db::TuningDb;
using kiln::db::Workload;

constexpr int kWorkloads = 20;

Workload workload(int i) {
  return Workload::make("dense", {{"M", 16 * (i + 1)}, {"N", 64}, {"K", 64}, {"dtype", "float32"}});
}

Target target(int i) {
  return i % 2 ? Target::make("llvm -mcpu=znver4", "x86-znver4")
               : Target::make("llvm -mattr=+avx512f -mcpu=znver4", "x86-znver4");
}

// Record `index` (its workload and target) with config `config` (default: the same index).
Record make_record(std::mt19937_64 &rng, const std::string &runner, int64_t index, int64_t config = -1) {
  Record r;
  r.workload = workload(static_cast<int>(index % kWorkloads));
  r.target = target(static_cast<int>(index / kWorkloads));
  r.config.index = config >= 0 ? config : index;
  r.config.space = "stress";
  r.config.knobs = {{"tile", kiln::contracts::Json::array({1, static_cast<int>(index % 32)})}};
  if (rng() % 8 == 0) {
    r.error = kiln::db::ErrorClass::kRuntimeDevice;
    r.error_message = "stress failure";
  } else {
    std::uniform_real_distribution<double> cost(1e-5, 1e-2);
    r.costs = {cost(rng), cost(rng)};
  }
  r.runner = runner;
  r.wall_s = 0.1;
  return r;
}

int write(const std::string &path, int writer, int64_t records, int64_t batch, int busy_ms) {
  kiln::db::TuningDbOptions options;
  options.busy_timeout = std::chrono::milliseconds(busy_ms);
  TuningDb db = TuningDb::open(path, options);
  std::mt19937_64 rng(static_cast<uint64_t>(writer) * 7919 + 1);
  std::string runner = "writer-" + std::to_string(writer);
  for (int64_t done = 0; done < records; done += batch) {
    std::vector<Record> records_batch;
    for (int64_t k = done; k < std::min(records, done + batch); ++k) {
      records_batch.push_back(make_record(rng, runner, k, int64_t{writer} * 1000000 + k));
    }
    db.insert(records_batch);
  }
  return 0;
}

int read(const std::string &path, const std::string &stop_file) {
  TuningDb db = TuningDb::open(path);
  std::map<std::pair<int, int>, double> best_seen;
  int64_t lookups = 0;
  std::mt19937_64 rng(3);
  while (!std::filesystem::exists(stop_file)) {
    int w = static_cast<int>(rng() % kWorkloads), t = static_cast<int>(rng() % 2);
    std::optional<Record> best = db.best(workload(w).key, target(t), kiln::db::Scope::kExact);
    ++lookups;
    if (!best) continue;
    auto key = std::make_pair(w, t);
    auto it = best_seen.find(key);
    if (it != best_seen.end() && best->mean() > it->second) {
      std::fprintf(stderr, "best of workload %d on target %d got worse: %g after %g\n", w, t, best->mean(), it->second);
      return 1;
    }
    best_seen[key] = best->mean();
  }
  std::printf("%lld\n", static_cast<long long>(lookups));
  return 0;
}

int crash(const std::string &path, int run, int64_t batch) {
  TuningDb db = TuningDb::open(path);
  std::mt19937_64 rng(static_cast<uint64_t>(run));
  std::string runner = "run-" + std::to_string(run);
  for (int64_t b = 0;; ++b) {
    std::vector<Record> records;
    for (int64_t k = b * batch; k < (b + 1) * batch; ++k) records.push_back(make_record(rng, runner, k));
    db.insert(records);
    std::printf("%lld\n", static_cast<long long>(b));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 6 && args[0] == "write") {
      return write(args[1], std::stoi(args[2]), std::stoll(args[3]), std::stoll(args[4]), std::stoi(args[5]));
    }
    if (args.size() == 3 && args[0] == "read") return read(args[1], args[2]);
    if (args.size() == 4 && args[0] == "crash") {
      return crash(args[1], std::stoi(args[2]), std::stoll(args[3]));
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "db_stress_child: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: db_stress_child write|read|crash ...\n");
  return 2;
}
