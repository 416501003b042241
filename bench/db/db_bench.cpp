// The tuning log at scale: fills a fresh database with N records (default 1,000,000) in batches
// of 1,000 belonging to one tuning job, then times best() and top_k(10) over random workloads and
// targets, and best() for a target string of the same class that was never measured (the
// device-class fallback). The peer is plain SQLite in the same run: the same rows inserted into
// one flat table with one index through one prepared statement, and the same best lookup on it.
// Rates are per wall-clock second; the *_cpu_per_s rates count CPU seconds of this process only,
// which is steadier on a shared machine. One line per figure group:
//   db records=N insert_per_s= best_p50_us= best_p99_us= topk10_p99_us=
//   db_detail records=N insert_cpu_per_s= best_class_p50_us= best_class_p99_us= topk10_p50_us=
//   db_peer records=N sqlite_raw_insert_per_s= sqlite_raw_insert_cpu_per_s=
//           sqlite_raw_best_p50_us= sqlite_raw_best_p99_us= insert_ratio= best_p99_ratio=
// Then (--import N, default 100,000; 0 skips it) `kiln db import` of N failed records of one
// workload on one target, as one tuning task produces them, each into a fresh file; the peer is the
// import of N valid records in the same run. The import checks every line against the stored
// records (import is idempotent), which must cost the same for failed records as for valid ones:
//   db_import records=N valid_per_s= failed_per_s= valid_cpu_per_s= failed_cpu_per_s= failed_to_valid=
// (--records 0 skips the insert and lookup figures.)
#include "db/record_json.h"
#include "db/sqlite_db.h"
#include "db/tuning_db.h"

#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kiln::db::Record;

struct Options {
  int64_t records = 1000000;
  int64_t batch = 1000;
  int64_t queries = 20000;
  int64_t records_per_workload = 500;
  int64_t import_records = 100000;
};

// CPU time of this process (user + system), in seconds.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// Deterministic synthetic data: a dense-like template family (one workload per 500 records), two
// targets of one device class, 10% failed measurements, three repeats per valid one.
class Generator {
 public:
  explicit Generator(const Options &options) : options_(options) {
    int64_t count = std::max<int64_t>(1, options.records / options.records_per_workload);
    for (int64_t i = 0; i < count; ++i) {
      int64_t m = 16 * (1 + i % 64), n = 16 * (1 + (i / 64) % 64), k = 64 * (1 + i / 4096);
      workloads_.push_back(
          kiln::db::Workload::make("dense.x86", {{"M", m}, {"N", n}, {"K", k}, {"dtype", "float32"}}, 2.0 * m * n * k));
    }
    targets_.push_back(kiln::db::Target::make("llvm -mcpu=znver4", "x86-znver4"));
    targets_.push_back(kiln::db::Target::make("llvm -mcpu=znver4 -mattr=+avx512f", "x86-znver4"));
  }

  // Record i arrives as a tuner produces them: in rounds of 64 configs of one task, the task
  // scheduler visiting every task in turn, first on one target, then on the other.
  Record make(int64_t i) {
    Record r;
    int64_t round = i / 64;
    int64_t tasks = static_cast<int64_t>(workloads_.size());
    r.workload = workloads_[static_cast<size_t>((round * 7919) % tasks)];
    r.target = targets_[static_cast<size_t>((round / tasks) % 2)];
    r.config.index = static_cast<int64_t>(rng_() % 1000000);
    r.config.space = "3f9a0c2d";
    r.config.knobs = {{"tile_m", kiln::contracts::Json::array({1, static_cast<int>(rng_() % 64)})},
                      {"tile_n", kiln::contracts::Json::array({1, static_cast<int>(rng_() % 64)})},
                      {"unroll", static_cast<int>(rng_() % 2)}};
    if (rng_() % 10 == 0) {
      r.error = kiln::db::ErrorClass::kCompileHost;
      r.error_message = "error: invalid vector width";
    } else {
      std::uniform_real_distribution<double> cost(1e-5, 1e-3);
      r.costs = {cost(rng_), cost(rng_), cost(rng_)};
    }
    r.wall_s = 0.8;
    r.runner = "runner-07";
    r.timestamp = 1.7e9 + static_cast<double>(i);
    return r;
  }

  const std::vector<kiln::db::Workload> &workloads() const { return workloads_; }
  const std::vector<kiln::db::Target> &targets() const { return targets_; }

 private:
  Options options_;
  std::vector<kiln::db::Workload> workloads_;
  std::vector<kiln::db::Target> targets_;
  std::mt19937_64 rng_{42};
};

struct Figures {
  double insert_per_s = 0;
  double insert_cpu_per_s = 0;  // records per CPU-second of this process
  std::vector<double> best_us, class_us, topk_us;
};

Figures bench_kiln(const Options &options, const std::string &path) {
  Generator gen(options);
  kiln::db::TuningDb tuning_db = kiln::db::TuningDb::open(path);
  int64_t job = tuning_db.create_job("bench", {{"tasks", gen.workloads().size()}}, options.records);
  tuning_db.update_job(job, kiln::db::JobState::kRunning);
  Figures f;
  double insert_seconds = 0, insert_cpu = 0;
  for (int64_t done = 0; done < options.records; done += options.batch) {
    std::vector<Record> batch;
    int64_t n = std::min(options.batch, options.records - done);
    for (int64_t i = 0; i < n; ++i) {
      batch.push_back(gen.make(done + i));
      batch.back().job_id = job;
    }
    auto start = Clock::now();
    double cpu_start = cpu_seconds();
    tuning_db.insert(batch);
    insert_cpu += cpu_seconds() - cpu_start;
    insert_seconds += seconds_since(start);
  }
  f.insert_per_s = static_cast<double>(options.records) / insert_seconds;
  f.insert_cpu_per_s = static_cast<double>(options.records) / insert_cpu;

  std::mt19937_64 rng(7);
  const auto &workloads = gen.workloads();
  kiln::db::Target unseen = kiln::db::Target::make("llvm -mcpu=znver4 -mattr=+avx2", "x86-znver4");
  int64_t found = 0;
  for (int64_t q = 0; q < options.queries; ++q) {
    const std::string &key = workloads[rng() % workloads.size()].key;
    const kiln::db::Target &target = gen.targets()[rng() % 2];
    auto start = Clock::now();
    auto best = tuning_db.best(key, target);
    f.best_us.push_back(seconds_since(start) * 1e6);
    found += best.has_value();

    start = Clock::now();
    auto top = tuning_db.top_k(key, target, 10);
    f.topk_us.push_back(seconds_since(start) * 1e6);

    start = Clock::now();
    auto fallback = tuning_db.best(key, unseen);
    f.class_us.push_back(seconds_since(start) * 1e6);
    found += fallback.has_value();
  }
  if (found != 2 * options.queries) std::fprintf(stderr, "warning: some lookups found nothing\n");
  return f;
}

Figures bench_raw(const Options &options, const std::string &path) {
  Generator gen(options);
  kiln::db::Database db(path);
  db.exec("PRAGMA synchronous = FULL");
  db.exec("PRAGMA cache_size = -65536");
  db.exec(
      "CREATE TABLE raw (id INTEGER PRIMARY KEY, workload_key TEXT, template_name TEXT, args TEXT, "
      "target TEXT, device_key TEXT, config_index INTEGER, space TEXT, config TEXT, "
      "error_class INTEGER, error_msg TEXT, costs TEXT, mean_s REAL, wall_s REAL, runner TEXT, "
      "kiln_version TEXT, measured_at REAL)");
  db.exec("CREATE INDEX raw_best ON raw(workload_key, target, error_class, mean_s)");
  Figures f;
  double insert_seconds = 0, insert_cpu = 0;
  kiln::db::Statement insert = db.prepare(
      "INSERT INTO raw (workload_key, template_name, args, target, device_key, config_index, "
      "space, config, error_class, error_msg, costs, mean_s, wall_s, runner, kiln_version, "
      "measured_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (int64_t done = 0; done < options.records; done += options.batch) {
    std::vector<Record> batch;
    int64_t n = std::min(options.batch, options.records - done);
    for (int64_t i = 0; i < n; ++i) batch.push_back(gen.make(done + i));
    auto start = Clock::now();
    double cpu_start = cpu_seconds();
    kiln::db::Transaction tx(db);
    for (const Record &r : batch) {
      insert.bind(1, r.workload.key).bind(2, r.workload.template_name).bind(3, r.workload.args);
      insert.bind(4, r.target.target).bind(5, r.target.device_key).bind(6, r.config.index);
      insert.bind(7, r.config.space).bind(8, r.config.knobs_json());
      insert.bind(9, static_cast<int>(r.error)).bind(10, r.error_message);
      insert.bind(11, nlohmann::json(r.costs).dump());
      if (r.valid()) {
        insert.bind(12, r.mean());
      } else {
        insert.bind_null(12);
      }
      insert.bind(13, r.wall_s).bind(14, r.runner).bind(15, "0.1.0").bind(16, r.timestamp);
      insert.run();
      insert.reset();
    }
    tx.commit();
    insert_cpu += cpu_seconds() - cpu_start;
    insert_seconds += seconds_since(start);
  }
  f.insert_per_s = static_cast<double>(options.records) / insert_seconds;
  f.insert_cpu_per_s = static_cast<double>(options.records) / insert_cpu;

  kiln::db::Statement best = db.prepare(
      "SELECT id, config_index, space, config, costs, mean_s, runner FROM raw "
      "WHERE workload_key = ? AND target = ? AND error_class = 0 ORDER BY mean_s LIMIT 1");
  std::mt19937_64 rng(7);
  const auto &workloads = gen.workloads();
  for (int64_t q = 0; q < options.queries; ++q) {
    const std::string &key = workloads[rng() % workloads.size()].key;
    const kiln::db::Target &target = gen.targets()[rng() % 2];
    auto start = Clock::now();
    best.bind(1, key).bind(2, target.target);
    if (best.step()) {
      volatile double mean = best.column_double(5);
      std::string config = best.column_text(3);
      (void)mean;
    }
    best.reset();
    f.best_us.push_back(seconds_since(start) * 1e6);
  }
  return f;
}

// The insert and lookup figures: TuningDb and the plain-SQLite peer.
void bench_insert_and_lookup(const Options &options, const fs::path &dir) {
  Figures kiln = bench_kiln(options, (dir / "kiln.db").string());
  Figures raw = bench_raw(options, (dir / "raw.db").string());
  std::printf(
      "db records=%lld insert_per_s=%.0f best_p50_us=%.1f best_p99_us=%.1f "
      "topk10_p99_us=%.1f\n",
      static_cast<long long>(options.records), kiln.insert_per_s, percentile(kiln.best_us, 0.50),
      percentile(kiln.best_us, 0.99), percentile(kiln.topk_us, 0.99));
  std::printf(
      "db_detail records=%lld insert_cpu_per_s=%.0f best_class_p50_us=%.1f "
      "best_class_p99_us=%.1f topk10_p50_us=%.1f\n",
      static_cast<long long>(options.records), kiln.insert_cpu_per_s, percentile(kiln.class_us, 0.50),
      percentile(kiln.class_us, 0.99), percentile(kiln.topk_us, 0.50));
  std::printf(
      "db_peer records=%lld sqlite_raw_insert_per_s=%.0f sqlite_raw_insert_cpu_per_s=%.0f "
      "sqlite_raw_best_p50_us=%.1f sqlite_raw_best_p99_us=%.1f insert_ratio=%.2f "
      "best_p99_ratio=%.2f\n",
      static_cast<long long>(options.records), raw.insert_per_s, raw.insert_cpu_per_s, percentile(raw.best_us, 0.50),
      percentile(raw.best_us, 0.99), kiln.insert_per_s / raw.insert_per_s,
      percentile(kiln.best_us, 0.99) / percentile(raw.best_us, 0.99));
}

struct ImportFigures {
  double per_s = 0;
  double cpu_per_s = 0;
};

// Imports N records of one task, all valid or all failed, from a JSON-lines file into a fresh log.
ImportFigures bench_import(int64_t n, bool valid, const fs::path &dir) {
  kiln::db::Workload workload = kiln::db::Workload::make(
      "dense.x86", {{"M", 512}, {"N", 512}, {"K", 512}, {"dtype", "float32"}}, 2.0 * 512 * 512 * 512);
  kiln::db::Target target = kiln::db::Target::make("llvm -mcpu=znver4", "x86-znver4");
  std::string name = valid ? "valid" : "failed";
  fs::path lines = dir / (name + ".jsonl");
  {
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> cost(1e-5, 1e-3);
    std::ofstream out(lines, std::ios::binary);
    for (int64_t i = 0; i < n; ++i) {
      Record r;
      r.workload = workload;
      r.target = target;
      r.config.index = i;
      r.config.space = "3f9a0c2d";
      r.config.knobs = {{"tile_m", kiln::contracts::Json::array({1, static_cast<int>(i % 64)})},
                        {"unroll", static_cast<int>(i % 2)}};
      if (valid) {
        r.costs = {cost(rng), cost(rng), cost(rng)};
      } else {
        r.error = kiln::db::ErrorClass::kCompileHost;
        r.error_message = "error: invalid vector width";
      }
      r.wall_s = 0.8;
      r.runner = "runner-07";
      r.kiln_version = "0.1.0";
      r.timestamp = 1.7e9 + static_cast<double>(i);
      out << kiln::db::record_to_json(r).dump() << '\n';
    }
  }
  kiln::db::TuningDb tuning_db = kiln::db::TuningDb::open((dir / (name + ".db")).string());
  std::ifstream in(lines, std::ios::binary);
  auto start = Clock::now();
  double cpu_start = cpu_seconds();
  kiln::db::ImportResult result = tuning_db.import_records(in);
  double seconds = seconds_since(start), cpu = cpu_seconds() - cpu_start;
  if (result.imported != n) {
    std::fprintf(stderr, "warning: imported %lld of %lld records\n", static_cast<long long>(result.imported),
                 static_cast<long long>(n));
  }
  fs::remove(lines);
  return {static_cast<double>(n) / seconds, static_cast<double>(n) / cpu};
}

}  // namespace

int main(int argc, char **argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--records")
      options.records = value;
    else if (flag == "--batch")
      options.batch = value;
    else if (flag == "--queries")
      options.queries = value;
    else if (flag == "--import")
      options.import_records = value;
    else {
      std::fprintf(stderr, "usage: %s [--records N] [--batch N] [--queries N] [--import N]\n", argv[0]);
      return 2;
    }
  }
  if (options.records < 0 || options.batch <= 0 || options.queries <= 0 || options.import_records < 0) {
    std::fprintf(stderr, "--batch and --queries must be positive, --records and --import not negative\n");
    return 2;
  }

  std::string pattern = (fs::temp_directory_path() / "kiln_bench_db_XXXXXX").string();
  if (!mkdtemp(pattern.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path dir = pattern;
  int status = 0;
  try {
    if (options.records > 0) bench_insert_and_lookup(options, dir);
    if (options.import_records > 0) {
      ImportFigures valid = bench_import(options.import_records, true, dir);
      ImportFigures failed = bench_import(options.import_records, false, dir);
      std::printf(
          "db_import records=%lld valid_per_s=%.0f failed_per_s=%.0f valid_cpu_per_s=%.0f failed_cpu_per_s=%.0f "
          "failed_to_valid=%.2f\n",
          static_cast<long long>(options.import_records), valid.per_s, failed.per_s, valid.cpu_per_s, failed.cpu_per_s,
          failed.per_s / valid.per_s);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln_bench_db: %s\n", e.what());
    status = 1;
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return status;
}
