// bench/model: whole models through Kiln against ONNX Runtime (CPU execution provider, from the npm
// package onnxruntime-node; bench/model/setup.sh installs it) on the same model files and inputs,
// in the same run. Kiln is measured three times: the reference executor on the imported graph
// (every node its own kernel), the executor after the graph passes (BatchNorm and constant folding,
// simplification, fusion, the layout pass), and the deployed artifact of the optimized graph (what
// `kiln compile` writes and `kiln run m.kiln` runs: one library, the static memory plan), which is
// the number users get and the one compared with ONNX Runtime. Templates run at their default
// configs unless --db gives a tuning log.
//
// Usage: model_bench --models DIR [--names resnet18,...] [--threads 1,2] [--runs N] [--ort DIR]
//                    [--db kiln.db --device-key K]
//   --threads: one thread count per run (Kiln's thread pool is sized once per process).
//   DIR holds <name>/model.onnx and <name>/input_0.pb (tests/frontend/make_models.py writes them).
// Prints one line per model and thread count:
//   model=M threads=T kiln_ref_ms= kiln_opt_ms= kiln_art_ms= ort_ms= art_vs_ort= opt_vs_ort= ref_vs_ort=
//   kiln_art_cpu_ms= ort_cpu_ms= art_vs_ort_cpu= kernels_ref= kernels_opt= tuned=
// where x_vs_ort = ort_ms / x_ms (above 1: Kiln is faster), medians of wall time over the runs;
// *_cpu_ms are the process's CPU time per run (mean over the runs), steadier than wall time on a
// machine shared with other work.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench/common/split_list.h"
#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "contracts/json.h"
#include "db/tuning_db.h"
#include "deploy/graph_module.h"
#include "tuner/db_config_lookup.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Timing {
  double median_ms = 0;  // wall time
  double cpu_ms = 0;     // the process's CPU time per run
};

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

Timing time_runs(const std::function<void()> &run_once, int runs) {
  for (int i = 0; i < 3; ++i) run_once();
  std::vector<double> t;
  const double c0 = process_cpu_ms();
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  Timing r;
  r.cpu_ms = (process_cpu_ms() - c0) / runs;
  std::sort(t.begin(), t.end());
  r.median_ms = t[t.size() / 2];
  return r;
}

Timing time_executor(const driver::GraphExecutor &ex, const deploy::Tensor &input, int runs) {
  const std::vector<deploy::Tensor> in{input};
  return time_runs([&] { ex.run(in); }, runs);
}

// The optimized graph compiled into an artifact (as `kiln compile` does) and run as deployed.
Timing time_artifact(const graph::Graph &g, const driver::ExecutorOptions &eo, const deploy::Tensor &input, int runs) {
  const std::string path =
      (fs::temp_directory_path() / ("kiln_model_bench_" + std::to_string(::getpid()) + ".kiln")).string();
  driver::GraphCompileOptions co;
  co.kernels = eo;
  driver::compile_graph(g, path, co);
  deploy::GraphModule m = deploy::GraphModule::load(path);
  fs::remove(path);
  m.set_input(0, input);
  return time_runs([&] { m.run(); }, runs);
}

// Runs the ONNX Runtime peer in a node process; its median and CPU time per run in ms, or -1.
Timing ort_ms(const std::string &ort_dir, const std::string &script, const std::string &model,
              const deploy::Tensor &input, int threads, int runs) {
  const std::string raw =
      (fs::temp_directory_path() / ("kiln_model_bench_input_" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(raw, std::ios::binary);
    f.write(static_cast<const char *>(input.data()), static_cast<std::streamsize>(input.nbytes()));
  }
  std::string dims = input.dtype().code == deploy::DType::Int ? "i64:" : "";
  for (size_t k = 0; k < input.shape().size(); ++k) dims += (k ? "x" : "") + std::to_string(input.shape()[k]);
  const std::string cmd = "NODE_PATH='" + ort_dir + "/node_modules' node '" + script + "' '" + model + "' '" + raw +
                          "' " + dims + " " + std::to_string(threads) + " " + std::to_string(runs);
  FILE *p = popen(cmd.c_str(), "r");
  std::string out;
  if (p) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  fs::remove(raw);
  try {
    const contracts::Json j = contracts::Json::parse(out);
    return Timing{j.at("median_ms").as_double(), j.at("cpu_ms").as_double()};
  } catch (const std::exception &) {
    std::fprintf(stderr, "ONNX Runtime failed on %s: %s\n", model.c_str(), out.c_str());
    return Timing{-1, -1};
  }
}

}  // namespace

int main(int argc, char **argv) {
  std::string models_dir, ort_dir = "build/bench/model/ort", db_path, device_key = "local-cpu";
  std::string names_text = "resnet18,mobilenet_v2,squeezenet1_1,bert_encoder";
  int threads = 1;
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--models")
      models_dir = next();
    else if (a == "--names")
      names_text = next();
    else if (a == "--threads")
      threads = std::max(1, std::atoi(next().c_str()));
    else if (a == "--runs")
      runs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--ort")
      ort_dir = next();
    else if (a == "--db")
      db_path = next();
    else if (a == "--device-key")
      device_key = next();
    else {
      std::fprintf(stderr,
                   "usage: model_bench --models DIR [--names a,b] [--threads 1,2] [--runs N] [--ort DIR] [--db F]\n");
      return 2;
    }
  }
  if (models_dir.empty()) {
    std::fprintf(stderr,
                 "model_bench: --models DIR is required (tests/frontend/make_models.py DIR writes the models)\n");
    return 2;
  }
  setenv("KILN_NUM_THREADS", std::to_string(threads).c_str(), 1);
  const std::string script = (fs::path(KILN_BENCH_MODEL_DIR) / "ort_runner.js").string();
  std::unique_ptr<db::TuningDb> log;
  std::unique_ptr<tuner::DbConfigLookup> lookup;
  driver::ExecutorOptions eo;
  if (!db_path.empty()) {
    db::TuningDbOptions dbo;
    dbo.read_only = true;
    log = std::make_unique<db::TuningDb>(db::TuningDb::open(db_path, dbo));
    lookup = std::make_unique<tuner::DbConfigLookup>(*log, device_key);
    eo.configs = lookup.get();
  }
  for (const std::string &name : bench::split_list(names_text)) {
    const std::string model = (fs::path(models_dir) / name / "model.onnx").string();
    const deploy::Tensor input =
        frontend::onnx::read_tensor_file((fs::path(models_dir) / name / "input_0.pb").string());
    graph::Graph g = frontend::onnx::import_model(model);
    driver::GraphExecutor ref(g, eo);
    driver::GraphExecutor opt(driver::optimize_graph(g), eo);
    const double r = time_executor(ref, input, runs).median_ms, o = time_executor(opt, input, runs).median_ms;
    const Timing art = time_artifact(opt.graph(), eo, input, runs);
    const Timing ort = ort_ms(ort_dir, script, model, input, threads, runs);
    auto ratio = [](double peer, double kiln) { return peer > 0 ? peer / kiln : 0.0; };
    std::printf(
        "model=%s threads=%d kiln_ref_ms=%.3f kiln_opt_ms=%.3f kiln_art_ms=%.3f ort_ms=%.3f art_vs_ort=%.2f "
        "opt_vs_ort=%.2f ref_vs_ort=%.2f kiln_art_cpu_ms=%.3f ort_cpu_ms=%.3f art_vs_ort_cpu=%.2f kernels_ref=%d "
        "kernels_opt=%d tuned=%d\n",
        name.c_str(), threads, r, o, art.median_ms, ort.median_ms, ratio(ort.median_ms, art.median_ms),
        ratio(ort.median_ms, o), ratio(ort.median_ms, r), art.cpu_ms, ort.cpu_ms, ratio(ort.cpu_ms, art.cpu_ms),
        ref.stats().kernels, opt.stats().kernels, opt.stats().tuned_kernels);
    std::fflush(stdout);
  }
  return 0;
}
