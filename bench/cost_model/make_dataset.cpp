// cost_model_dataset: measures random valid configs of the cost-model benchmark's workloads
// (workloads.h) on this machine and stores every result in a tuning log, the dataset that
// cost_model_bench reads. Configs are drawn uniformly among the valid configs of each workload's
// space (seeded), plus the default config; candidates are measured by the runner's measurement
// pool in this process (worker processes compile and time them; see rpc_server/measure_pool.h),
// on `--threads` threads, in batches that are committed to the log as they finish. Running it
// again with the same log resumes: configs already measured are not measured again.
//
//   cost_model_dataset --db PATH [--configs N] [--workloads SUBSTR,...] [--seed S]
//                      [--threads T] [--target "llvm -mcpu=native"] [--batch B]
//   cost_model_dataset --db PATH --export-csv OUT [--configs N] [--workloads SUBSTR,...]
//
// The second form writes a compact sample of the log for the unit tests
// (tests/cost_model/data/): per selected workload, a line
//   #workload <label> <template> <space fingerprint> <canonical args JSON>
// then up to N lines "<config index>,<GFLOP/s>" (0 for a failure), every record in log order.
//
// One progress line per batch:
//   dataset workload= measured= of= failed= best_gflops= elapsed_s=
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/common/split_list.h"
#include "bench/cost_model/workloads.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/wire.h"
#include "tuner/measurer.h"

namespace {

using namespace kiln;
using contracts::Json;

struct Options {
  std::string db;
  int64_t configs = 1000;
  std::vector<std::string> filters;
  uint64_t seed = 1;
  int threads = 1;
  std::string target = "llvm -mcpu=native";
  size_t batch = 32;
  std::string export_csv;
};

[[noreturn]] void usage(const std::string &problem) {
  std::fprintf(stderr,
               "cost_model_dataset: %s\nusage: cost_model_dataset --db PATH [--configs N] [--workloads SUBSTR,...] "
               "[--seed S] [--threads T] [--target TARGET] [--batch B]\n",
               problem.c_str());
  std::exit(2);
}

Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--db") {
      o.db = value;
    } else if (flag == "--configs") {
      o.configs = std::stoll(value);
    } else if (flag == "--workloads") {
      o.filters = bench::split_list(value);
    } else if (flag == "--seed") {
      o.seed = std::stoull(value);
    } else if (flag == "--threads") {
      o.threads = std::stoi(value);
    } else if (flag == "--target") {
      o.target = value;
    } else if (flag == "--export-csv") {
      o.export_csv = value;
    } else if (flag == "--batch") {
      o.batch = static_cast<size_t>(std::stoul(value));
    } else {
      usage("unknown option " + flag);
    }
  }
  if (o.db.empty()) usage("--db is required");
  if (o.configs < 1 || o.threads < 1 || o.batch < 1) usage("--configs, --threads and --batch must be positive");
  return o;
}

bool selected(const bench::CostModelWorkload &w, const std::vector<std::string> &filters) {
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(), [&](const std::string &f) {
    return w.label.find(f) != std::string::npos || w.template_name.find(f) != std::string::npos;
  });
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int export_csv(const Options &o) {
  const ops::Target target = driver::resolve_target(o.target);
  db::TuningDbOptions dbo;
  dbo.create = false;
  db::TuningDb log = db::TuningDb::open(o.db, dbo);
  FILE *out = std::fopen(o.export_csv.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "cost_model_dataset: cannot write %s\n", o.export_csv.c_str());
    return 1;
  }
  for (const bench::CostModelWorkload &w : bench::cost_model_workloads()) {
    if (!selected(w, o.filters)) continue;
    const ops::Task task(w.template_name, w.args, target);
    std::fprintf(out, "#workload %s %s %s %s\n", w.label.c_str(), w.template_name.c_str(),
                 task.space().fingerprint().c_str(), task.workload().args_json.c_str());
    db::ExportFilter filter;
    filter.workload_key = task.key();
    int64_t n = 0, other_space = 0;
    log.for_each_record(filter, [&](const db::Record &r) {
      if (n >= o.configs || r.error == db::ErrorClass::kInfra) return;
      // A log may hold the records of an older version of the template's space beside this one's.
      if (r.config.space != task.space().fingerprint()) {
        ++other_space;
        return;
      }
      ++n;
      std::fprintf(out, "%lld,%.2f\n", static_cast<long long>(r.config.index),
                   r.valid() ? task.flop() / r.mean() / 1e9 : 0.0);
    });
    if (n == 0 && other_space > 0) {
      std::fclose(out);
      throw UserError(w.label + ": the log's configs belong to another space than " + o.target +
                      " gives (another target, or another version of " + w.template_name +
                      "); export with the target they were measured on");
    }
  }
  std::fclose(out);
  return 0;
}

int run(const Options &o) {
  if (!o.export_csv.empty()) return export_csv(o);
  const ops::Target target = driver::resolve_target(o.target);
  const std::string target_text = target.target.str();
  db::TuningDb log = db::TuningDb::open(o.db);

  rpc::MeasurePoolOptions pool_options;
  pool_options.build_workers = 1;
  pool_options.target = target_text;
  pool_options.runner_id = "cost-model-dataset";
  rpc::MeasurePool pool(pool_options);

  kiln::v1::MeasureOptions measure;
  measure.set_number(1);
  measure.set_repeat(3);
  measure.set_min_repeat_ms(5);
  measure.set_build_timeout_ms(30000);
  measure.set_run_timeout_ms(5000);
  measure.set_threads(static_cast<uint32_t>(o.threads));

  const auto t0 = std::chrono::steady_clock::now();
  for (const bench::CostModelWorkload &w : bench::cost_model_workloads()) {
    if (!selected(w, o.filters)) continue;
    const ops::Task task(w.template_name, w.args, target);

    // The configs already in the log for this workload and this space, so that a second run
    // resumes. Records of another version of the template's space number their configs
    // differently: they are not this space's configs and are measured again.
    std::set<int64_t> measured;
    db::ExportFilter filter;
    filter.workload_key = task.key();
    log.for_each_record(filter, [&](const db::Record &r) {
      if (r.config.space == task.space().fingerprint()) measured.insert(r.config.index);
    });

    // The plan: the default config, then uniform valid configs, distinct, seeded per workload.
    const int64_t wanted = std::min(o.configs, task.space().count_valid());
    std::vector<autotune::Config> plan;
    std::set<int64_t> planned;
    std::mt19937_64 rng(o.seed ^ std::hash<std::string>()(task.key()));
    const autotune::Config first = task.default_config();
    plan.push_back(first);
    planned.insert(first.index());
    for (int64_t tries = 0; static_cast<int64_t>(plan.size()) < wanted && tries < wanted * 50; ++tries) {
      autotune::Config c = task.space().sample(rng);
      if (planned.insert(c.index()).second) plan.push_back(c);
    }
    std::vector<autotune::Config> todo;
    for (const autotune::Config &c : plan) {
      if (!measured.count(c.index())) todo.push_back(c);
    }

    int64_t done = static_cast<int64_t>(plan.size() - todo.size()), failed = 0;
    double best_gflops = 0;
    for (size_t start = 0; start < todo.size(); start += o.batch) {
      const size_t end = std::min(todo.size(), start + o.batch);
      std::vector<rpc::Candidate> batch;
      for (size_t i = start; i < end; ++i) {
        rpc::Candidate c;
        c.workload = rpc::workload_to_proto(task.workload());
        c.target = rpc::target_to_proto(target.target, "cpu-local");
        c.config = rpc::config_to_proto(todo[i]);
        batch.push_back(std::move(c));
      }
      std::vector<db::Record> records(batch.size());
      std::optional<rpc::MeasureRejection> rejected =
          pool.measure(batch, measure, [&](size_t i, const kiln::v1::MeasureResult &r) {
            records[i] = tuner::make_record(task, "cpu-local", todo[start + i], tuner::outcome_from_proto(r));
          });
      if (rejected) {
        std::fprintf(stderr, "cost_model_dataset: %s: the batch was refused: %s\n", w.label.c_str(),
                     rejected->message.c_str());
        return 1;
      }
      // INFRA results say nothing about the config; they are measured again on the next run.
      std::vector<db::Record> keep;
      for (db::Record &r : records) {
        if (r.error == db::ErrorClass::kInfra) continue;
        if (!r.valid()) ++failed;
        if (r.valid()) best_gflops = std::max(best_gflops, task.flop() / r.mean() / 1e9);
        keep.push_back(std::move(r));
      }
      log.insert(keep);
      done += static_cast<int64_t>(keep.size());
      std::printf("dataset workload=%s measured=%lld of=%lld failed=%lld best_gflops=%.1f elapsed_s=%.0f\n",
                  w.label.c_str(), static_cast<long long>(done), static_cast<long long>(plan.size()),
                  static_cast<long long>(failed), best_gflops, seconds_since(t0));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return kiln::rpc::measure_worker_main();
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cost_model_dataset: error: %s\n", e.what());
    return 1;
  }
}
