// bench/model: whole models through Kiln against ONNX Runtime (CPU execution provider, from the npm
// package onnxruntime-node; bench/model/setup.sh installs it) on the same model files and inputs,
// in the same run. Kiln is measured twice: the reference executor on the imported graph (every node
// its own kernel), and after the graph passes (BatchNorm and constant folding, simplification,
// conv epilogue fusion). Templates run at their default configs unless --db gives a tuning log.
//
// Usage: model_bench --models DIR [--names resnet18,...] [--threads 1,2] [--runs N] [--ort DIR]
//                    [--db kiln.db --device-key K]
//   --threads: one thread count per run (Kiln's thread pool is sized once per process).
//   DIR holds <name>/model.onnx and <name>/input_0.pb (tests/frontend/make_models.py writes them).
// Prints one line per model and thread count:
//   model=M threads=T kiln_ref_ms= kiln_opt_ms= ort_ms= opt_vs_ort= ref_vs_ort= kernels_ref= kernels_opt=
// where x_vs_ort = ort_ms / x_ms (above 1: Kiln is faster), medians over the runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench/common/split_list.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "contracts/json.h"
#include "db/tuning_db.h"
#include "tuner/db_config_lookup.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

double median_ms(const driver::GraphExecutor &ex, const deploy::Tensor &input, int runs) {
  for (int i = 0; i < 3; ++i) ex.run(std::vector<deploy::Tensor>{input});
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ex.run(std::vector<deploy::Tensor>{input});
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Runs the ONNX Runtime peer in a node process; its median in ms, or -1.
double ort_ms(const std::string &ort_dir, const std::string &script, const std::string &model,
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
    return contracts::Json::parse(out).at("median_ms").as_double();
  } catch (const std::exception &) {
    std::fprintf(stderr, "ONNX Runtime failed on %s: %s\n", model.c_str(), out.c_str());
    return -1;
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
    driver::GraphPipelineOptions po;
    po.configs = eo.configs;  // the layout pass's blocks follow the configs the executor builds with
    driver::GraphExecutor opt(driver::optimize_graph(g, po), eo);
    const double r = median_ms(ref, input, runs), o = median_ms(opt, input, runs);
    const double ort = ort_ms(ort_dir, script, model, input, threads, runs);
    std::printf(
        "model=%s threads=%d kiln_ref_ms=%.3f kiln_opt_ms=%.3f ort_ms=%.3f opt_vs_ort=%.2f ref_vs_ort=%.2f "
        "kernels_ref=%d kernels_opt=%d tuned=%d\n",
        name.c_str(), threads, r, o, ort, ort > 0 ? ort / o : 0.0, ort > 0 ? ort / r : 0.0, ref.stats().kernels,
        opt.stats().kernels, opt.stats().tuned_kernels);
    std::fflush(stdout);
  }
  return 0;
}
