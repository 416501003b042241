// bench/model: whole models through Kiln against ONNX Runtime (CPU execution provider, from the npm
// package onnxruntime-node; bench/model/setup.sh installs it) on the same model files and inputs,
// in the same run. Kiln is measured three times: the reference executor on the imported graph
// (every node its own kernel), the executor after the graph passes (BatchNorm and constant folding,
// simplification, fusion, the layout pass), and the deployed artifact of the optimized graph (what
// `kiln compile` writes and `kiln run m.kiln` runs: one library, the static memory plan), which is
// the number users get and the one compared with ONNX Runtime. Templates run at their default
// configs; with --db the artifact is compiled twice, at the default configs and at the tuning log's,
// and the two are timed interleaved (one run of each in turn) so that both see the same load.
//
// Usage: model_bench --models DIR [--names resnet18,...] [--threads 1,2] [--runs N] [--ort DIR]
//                    [--db kiln.db --device-key K] [--artifact-only] [--per-op]
//   --threads: one thread count per run (Kiln's thread pool is sized once per process).
//   --artifact-only: skip the two executors (only the artifacts and ONNX Runtime are timed).
//   --per-op: after each model's line, a table of Kiln's kernels, each timed inside the model (the
//     artifact's profiled runs, deploy::profile_runs) and alone (as a one-node artifact, as
//     node_bench --artifact does), beside ONNX Runtime's nodes (its profiler's kernel times in the
//     session, matched by name), sorted by Kiln's in-model loss; the profiler makes ONNX Runtime's
//     whole-model time of that run a little slower.
//   DIR holds <name>/model.onnx and <name>/input_0.pb (tests/frontend/make_models.py DIR [NAME...]
//   writes them; it writes bert_base_layer, one encoder layer at BERT-base's size, only when named).
// Prints one line per model and thread count:
//   model=M threads=T kiln_ref_ms= kiln_opt_ms= kiln_art_ms= ort_ms= art_vs_ort= opt_vs_ort= ref_vs_ort=
//   kiln_art_cpu_ms= ort_cpu_ms= art_vs_ort_cpu= ort_cpu_per_wall= kernels_ref= kernels_opt= tuned=
//   compile_s= peak_mb= unplanned_mb=
// and with --db also
//   kiln_tuned_ms= kiln_tuned_cpu_ms= tuned_vs_ort= tuned_vs_ort_cpu= tuned_vs_untuned= tuned_kernels=
//   template_kernels= compile_tuned_s=
// then headline=cpu|wall untuned_vs_ort= [tuned_vs_ort_headline=] ort_call_overhead_ms= art_vs_ort_net=,
// the headline being the honest ratio: the CPU-time one
// unless ONNX Runtime's CPU time exceeds its wall time times its threads by over 5% (work on threads
// it was not given, as the node binding's for a model of microseconds), then the wall-time one;
// ort_call_overhead_ms is the node binding's fixed cost per call (the median of a trivial model, one
// Add of 16 floats, through the same runner and session options) and art_vs_ort_net the wall-time
// ratio with that cost taken off ONNX Runtime's time (for a model of microseconds, such as the
// BERT-style encoder, the raw ratio mostly measures the binding); and
// a last line with their geomean over the models:
//   geomean threads=T models=K untuned_vs_ort= [tuned_vs_ort=]
// where x_vs_ort = ort_ms / x_ms (above 1: Kiln is faster), medians of wall time over the runs;
// *_cpu_ms are the process's CPU time per run (mean over the runs), steadier than wall time on a
// machine shared with other work as long as each side runs on the threads it is given:
// ort_cpu_per_wall is ONNX Runtime's CPU time over its wall time (at 1 thread above 1 means work
// on other threads, and the CPU-time ratio then overstates ONNX Runtime's cost). compile_s is the
// graph passes plus `compile_graph` (what `kiln compile` does), peak_mb the static memory plan's
// arena (inputs, outputs and intermediates; parameters aside) and unplanned_mb the same tensors
// without reuse.
#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <unistd.h>
#include <vector>

#include "bench/common/split_list.h"
#include "bench/model/node_times.h"
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

// One node of ONNX Runtime's session (its profiler's name: a fused node is named after its output).
struct OrtNode {
  std::string name, op;
  double ms = 0;
};

// What the ONNX Runtime peer reports: the model's timing, with --profile its nodes' times, and the
// binding's fixed cost per call (a trivial model through the same runner and session options).
struct OrtResult {
  Timing model{-1, -1};
  Timing overhead{-1, -1};
  std::vector<OrtNode> nodes;
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

// The optimized graph compiled into an artifact (as `kiln compile` does) and loaded as deployed.
struct Artifact {
  deploy::GraphModule module;
  driver::GraphCompileReport report;
};

Artifact compile_artifact(const graph::Graph &g, const driver::ExecutorOptions &eo, const deploy::Tensor &input) {
  const std::string path =
      (fs::temp_directory_path() / ("kiln_model_bench_" + std::to_string(::getpid()) + ".kiln")).string();
  driver::GraphCompileOptions co;
  co.kernels = eo;
  driver::GraphCompileReport report = driver::compile_graph(g, path, co);
  deploy::GraphModule m = deploy::GraphModule::load(path);
  fs::remove(path);
  m.set_input(0, input);
  return Artifact{std::move(m), report};
}

// Two artifacts timed interleaved: one run of each in turn, so both see the same load.
std::pair<Timing, Timing> time_interleaved(deploy::GraphModule &a, deploy::GraphModule &b, int runs) {
  for (int i = 0; i < 3; ++i) {
    a.run();
    b.run();
  }
  std::vector<double> ta, tb;
  double ca = 0, cb = 0;
  for (int i = 0; i < runs; ++i) {
    for (int k = 0; k < 2; ++k) {
      deploy::GraphModule &m = k == 0 ? a : b;
      const double c0 = process_cpu_ms();
      const auto t0 = std::chrono::steady_clock::now();
      m.run();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      (k == 0 ? ta : tb).push_back(ms);
      (k == 0 ? ca : cb) += process_cpu_ms() - c0;
    }
  }
  auto median = [](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  return {Timing{median(ta), ca / runs}, Timing{median(tb), cb / runs}};
}

// Runs the ONNX Runtime peer in a node process; its median and CPU time per run in ms, or -1.
OrtResult run_ort(const std::string &ort_dir, const std::string &script, const std::string &model,
                  const deploy::Tensor &input, int threads, int runs, bool profile) {
  const std::string raw =
      (fs::temp_directory_path() / ("kiln_model_bench_input_" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(raw, std::ios::binary);
    f.write(static_cast<const char *>(input.data()), static_cast<std::streamsize>(input.nbytes()));
  }
  std::string dims = input.dtype().code == deploy::DType::Int ? "i64:" : "";
  for (size_t k = 0; k < input.shape().size(); ++k) dims += (k ? "x" : "") + std::to_string(input.shape()[k]);
  const std::string cmd = "NODE_PATH='" + ort_dir + "/node_modules' node '" + script + "' '" + model + "' '" + raw +
                          "' " + dims + " " + std::to_string(threads) + " " + std::to_string(runs) + " --overhead" +
                          (profile ? " --profile '" + raw + "_profile'" : "");
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
    OrtResult r;
    r.model = Timing{j.at("median_ms").as_double(), j.at("cpu_ms").as_double()};
    r.overhead = Timing{j.at("overhead_ms").as_double(), j.at("overhead_cpu_ms").as_double()};
    if (const contracts::Json *nodes = j.find("nodes"))
      for (const contracts::Json &n : nodes->as_array())
        r.nodes.push_back({n.at("name").as_string(), n.at("op").as_string(), n.at("ms").as_double()});
    return r;
  } catch (const std::exception &) {
    std::fprintf(stderr, "ONNX Runtime failed on %s: %s\n", model.c_str(), out.c_str());
    return OrtResult{};
  }
}

// --per-op: Kiln's kernels, inside the model (the artifact's profiled steps) and each compiled and
// run alone as a one-node artifact (bench/model/node_times.h), beside ONNX Runtime's nodes (its profiler's kernel times
// in the session), matched by name: an ONNX Runtime node is named after the Kiln node or one of its outputs, layout
// suffixes aside (ONNX Runtime names a fused or NCHWc node after its output). One row per pair, or per node of either
// side alone; sorted by Kiln's loss (its time minus ONNX Runtime's, Kiln's in-model time where the artifact ran the
// node), largest first. `in_model`: each node's time inside the artifact's run (its steps' medians).
void print_per_op(const std::string &name, const graph::Graph &optimized, const std::vector<OrtNode> &ort,
                  const std::map<std::string, double> &in_model, const deploy::RunProfile &profile, int runs) {
  const std::vector<bench::NodeTime> kiln = bench::time_nodes(optimized, runs, bench::NodeRunner::Artifact);
  // A tensor's name without the layout suffix either side gives it: Kiln's "_nchw16c", ONNX
  // Runtime's "_nchwc", and the layout pass's "_padded" for channels padded to whole vectors.
  auto strip = [](std::string s) {
    const size_t at = s.rfind("_nchw");
    bool layout = at != std::string::npos && s.back() == 'c';
    for (size_t i = at + 5; layout && i + 1 < s.size(); ++i)
      layout = std::isdigit(static_cast<unsigned char>(s[i])) != 0;
    if (layout) s.resize(at);
    const std::string padded = "_padded";
    if (s.size() > padded.size() && s.compare(s.size() - padded.size(), padded.size(), padded) == 0)
      s.resize(s.size() - padded.size());
    return s;
  };
  std::map<std::string, size_t> by_name;  // a Kiln node's name and its outputs' names -> row
  for (const graph::Node &n : optimized.nodes())
    for (size_t k = 0; k < kiln.size(); ++k)
      if (kiln[k].node == n.name) {
        by_name[n.name] = k;
        // A conv with a residual add in its epilogue: ONNX Runtime names it after the conv's own
        // output (the exporter's NODE_output_0), Kiln's output is the add's (or its activation's).
        by_name[n.name + "_output_0"] = k;
        for (graph::ValueId o : n.outputs) by_name[strip(optimized.value(o).name)] = k;
      }
  struct Row {
    std::string kiln_node, kiln_kernel, ort_nodes, ort_ops;
    double kiln_ms = -1, ort_ms = -1, model_ms = -1;
  };
  std::vector<Row> rows(kiln.size());
  double in_model_total = 0;
  for (size_t k = 0; k < kiln.size(); ++k) {
    auto it = in_model.find(kiln[k].node);
    rows[k] = {kiln[k].node, kiln[k].kernel, "", "", kiln[k].ms, -1, it == in_model.end() ? -1 : it->second};
  }
  for (const auto &[node, ms] : in_model) {
    in_model_total += ms;
    if (std::none_of(kiln.begin(), kiln.end(), [&](const bench::NodeTime &k) { return k.node == node; }))
      rows.push_back({node, "(model only)", "", "", -1, -1, ms});
  }
  double kiln_total = 0, ort_total = 0;
  for (const bench::NodeTime &k : kiln) kiln_total += k.ms;
  for (const OrtNode &o : ort) {
    ort_total += o.ms;
    auto it = by_name.find(o.name);
    if (it == by_name.end()) it = by_name.find(strip(o.name));
    if (it == by_name.end()) {
      rows.push_back({"-", "-", o.name, o.op, -1, o.ms});
      continue;
    }
    Row &r = rows[it->second];
    r.ort_nodes += (r.ort_nodes.empty() ? "" : "+") + o.name;
    r.ort_ops += (r.ort_ops.empty() ? "" : "+") + o.op;
    r.ort_ms = std::max(r.ort_ms, 0.0) + o.ms;
  }
  auto kiln_ms = [](const Row &r) { return r.model_ms >= 0 ? r.model_ms : std::max(r.kiln_ms, 0.0); };
  auto loss = [&](const Row &r) { return kiln_ms(r) - std::max(r.ort_ms, 0.0); };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row &a, const Row &b) { return loss(a) > loss(b); });
  std::printf(
      "per-op model=%s kiln_kernels=%zu ort_nodes=%zu kiln_in_model_sum_ms=%.3f kiln_alone_sum_ms=%.3f "
      "ort_sum_ms=%.3f kiln_profiled_run_ms=%.3f kiln_run_ms=%.3f\n",
      name.c_str(), kiln.size(), ort.size(), in_model_total, kiln_total, ort_total, profile.steps_ms, profile.run_ms);
  std::printf("  %9s %9s %9s %9s %9s %9s  %-20s %-44s %s\n", "model_ms", "alone_ms", "ort_ms", "mod/alone", "mod/ort",
              "loss_ms", "kiln_kernel", "kiln_node", "ort_node (op)");
  auto cell = [](char(&buf)[16], double v, const char *format) {
    if (v >= 0) std::snprintf(buf, sizeof buf, format, v);
  };
  for (const Row &r : rows) {
    char m[16] = "-", k[16] = "-", o[16] = "-", qa[16] = "-", qo[16] = "-";
    cell(m, r.model_ms, "%.4f");
    cell(k, r.kiln_ms, "%.4f");
    cell(o, r.ort_ms, "%.4f");
    if (r.model_ms > 0 && r.kiln_ms > 0) cell(qa, r.model_ms / r.kiln_ms, "%.2f");
    if (r.ort_ms > 0 && kiln_ms(r) > 0) cell(qo, kiln_ms(r) / r.ort_ms, "%.2f");
    std::printf("  %9s %9s %9s %9s %9s %9.4f  %-20s %-44s %s (%s)\n", m, k, o, qa, qo, loss(r), r.kiln_kernel.c_str(),
                r.kiln_node.c_str(), r.ort_nodes.empty() ? "-" : r.ort_nodes.c_str(),
                r.ort_ops.empty() ? "-" : r.ort_ops.c_str());
  }
  std::fflush(stdout);
}

// --per-op with --db: each node's time inside the untuned and the tuned artifact (their profiled
// steps' medians, a node's steps summed: its kernel and the layout transforms the layout pass named
// after it), matched by name, the largest tuned loss first; a node only one of them has shows "-".
void print_tuned_per_op(const std::string &name, deploy::GraphModule &untuned, const deploy::RunProfile &pu,
                        deploy::GraphModule &tuned, const graph::Graph &tuned_graph, const ops::ConfigLookup *configs,
                        int runs) {
  const deploy::RunProfile pt = deploy::profile_runs(tuned, runs);
  struct Row {
    double untuned_ms = -1, tuned_ms = -1, alone_ms = -1;
    std::string kernel;
  };
  std::map<std::string, Row> rows;
  for (const bench::NodeTime &t : bench::time_nodes(tuned_graph, runs, bench::NodeRunner::Artifact, configs))
    rows[t.node].alone_ms = t.ms;
  for (size_t k = 0; k < pu.step_ms.size(); ++k) {
    Row &r = rows[untuned.steps()[k].node];
    r.untuned_ms = std::max(r.untuned_ms, 0.0) + pu.step_ms[k];
    r.kernel = untuned.steps()[k].op;
  }
  for (size_t k = 0; k < pt.step_ms.size(); ++k) {
    Row &r = rows[tuned.steps()[k].node];
    r.tuned_ms = std::max(r.tuned_ms, 0.0) + pt.step_ms[k];
    if (r.kernel.empty()) r.kernel = tuned.steps()[k].op;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  auto loss = [](const Row &r) { return std::max(r.tuned_ms, 0.0) - std::max(r.untuned_ms, 0.0); };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const auto &a, const auto &b) { return loss(a.second) > loss(b.second); });
  std::printf("tuned-per-op model=%s untuned_steps_ms=%.3f tuned_steps_ms=%.3f untuned_run_ms=%.3f tuned_run_ms=%.3f\n",
              name.c_str(), pu.steps_ms, pt.steps_ms, pu.run_ms, pt.run_ms);
  std::printf("  %10s %10s %14s %9s  %-20s %s\n", "untuned_ms", "tuned_ms", "tuned_alone_ms", "loss_ms", "op", "node");
  for (const auto &[node, r] : sorted) {
    char u[16] = "-", t[16] = "-", a[16] = "-";
    if (r.untuned_ms >= 0) std::snprintf(u, sizeof u, "%.4f", r.untuned_ms);
    if (r.tuned_ms >= 0) std::snprintf(t, sizeof t, "%.4f", r.tuned_ms);
    if (r.alone_ms >= 0) std::snprintf(a, sizeof a, "%.4f", r.alone_ms);
    std::printf("  %10s %10s %14s %9.4f  %-20s %s\n", u, t, a, loss(r), r.kernel.c_str(), node.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int run_bench(int argc, char **argv) {
  std::string models_dir, ort_dir = "build/bench/model/ort", db_path, device_key = "local-cpu";
  std::string names_text = "resnet18,mobilenet_v2,squeezenet1_1,bert_encoder,bert_base_layer";
  int threads = 1;
  int runs = 20;
  bool artifact_only = false, per_op = false;
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
    else if (a == "--artifact-only")
      artifact_only = true;
    else if (a == "--per-op")
      per_op = true;
    else {
      std::fprintf(stderr,
                   "usage: model_bench --models DIR [--names a,b] [--threads 1,2] [--runs N] [--ort DIR] [--db F] "
                   "[--artifact-only] [--per-op]\n");
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
  driver::ExecutorOptions untuned, tuned;
  if (!db_path.empty()) {
    db::TuningDbOptions dbo;
    dbo.read_only = true;
    log = std::make_unique<db::TuningDb>(db::TuningDb::open(db_path, dbo));
    lookup = std::make_unique<tuner::DbConfigLookup>(*log, device_key);
    tuned.configs = lookup.get();
  }
  double log_untuned = 0, log_tuned = 0;
  int rated = 0;
  for (const std::string &name : bench::split_list(names_text)) {
    const std::string model = (fs::path(models_dir) / name / "model.onnx").string();
    const deploy::Tensor input =
        frontend::onnx::read_tensor_file((fs::path(models_dir) / name / "input_0.pb").string());
    graph::Graph g = frontend::onnx::import_model(model);
    const auto p0 = std::chrono::steady_clock::now();
    const graph::Graph optimized = driver::optimize_graph(g);
    const double passes_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    double r = -1, o = -1;
    int kernels_ref = 0, kernels_opt = 0;
    if (!artifact_only) {
      driver::GraphExecutor ref(g, untuned);
      driver::GraphExecutor opt(optimized, untuned);
      r = time_executor(ref, input, runs).median_ms;
      o = time_executor(opt, input, runs).median_ms;
      kernels_ref = ref.stats().kernels;
      kernels_opt = opt.stats().kernels;
    }
    auto art = std::make_unique<Artifact>(compile_artifact(optimized, untuned, input));
    Timing art_t, tuned_t;
    std::unique_ptr<Artifact> art_tuned;
    graph::Graph tuned_graph;
    if (lookup) {
      // The layout takes the convolutions' blocks from the log.
      driver::GraphPipelineOptions po = driver::GraphPipelineOptions::from_env();
      po.configs = lookup.get();
      tuned_graph = driver::optimize_graph(g, po);
      art_tuned = std::make_unique<Artifact>(compile_artifact(tuned_graph, tuned, input));
      std::tie(art_t, tuned_t) = time_interleaved(art->module, art_tuned->module, runs);
    } else {
      art_t = time_runs([&] { art->module.run(); }, runs);
    }
    const OrtResult ort_run = run_ort(ort_dir, script, model, input, threads, runs, per_op);
    const Timing &ort = ort_run.model;
    auto ratio = [](double peer, double kiln) { return peer > 0 && kiln > 0 ? peer / kiln : 0.0; };
    const double mb = 1024.0 * 1024.0;
    std::printf(
        "model=%s threads=%d kiln_ref_ms=%.3f kiln_opt_ms=%.3f kiln_art_ms=%.3f ort_ms=%.3f art_vs_ort=%.2f "
        "opt_vs_ort=%.2f ref_vs_ort=%.2f kiln_art_cpu_ms=%.3f ort_cpu_ms=%.3f art_vs_ort_cpu=%.2f "
        "ort_cpu_per_wall=%.2f kernels_ref=%d kernels_opt=%d tuned=%d compile_s=%.2f peak_mb=%.2f "
        "unplanned_mb=%.2f",
        name.c_str(), threads, r, o, art_t.median_ms, ort.median_ms, ratio(ort.median_ms, art_t.median_ms),
        ratio(ort.median_ms, o), ratio(ort.median_ms, r), art_t.cpu_ms, ort.cpu_ms, ratio(ort.cpu_ms, art_t.cpu_ms),
        ratio(ort.cpu_ms, ort.median_ms), kernels_ref, kernels_opt, art->report.tuned_kernels,
        passes_s + art->report.compile_s, static_cast<double>(art->report.arena_bytes) / mb,
        static_cast<double>(art->report.unplanned_bytes) / mb);
    if (art_tuned) {
      std::printf(
          " kiln_tuned_ms=%.3f kiln_tuned_cpu_ms=%.3f tuned_vs_ort=%.2f tuned_vs_ort_cpu=%.2f tuned_vs_untuned=%.2f "
          "tuned_kernels=%d template_kernels=%d compile_tuned_s=%.2f",
          tuned_t.median_ms, tuned_t.cpu_ms, ratio(ort.median_ms, tuned_t.median_ms), ratio(ort.cpu_ms, tuned_t.cpu_ms),
          ratio(art_t.median_ms, tuned_t.median_ms), art_tuned->report.tuned_kernels,
          art_tuned->report.template_kernels, passes_s + art_tuned->report.compile_s);
    }
    // The headline: the CPU-time ratio while ONNX Runtime's CPU time stays within its wall time per
    // thread it was given, else (work on threads beyond them, e.g. the node binding's) the wall-time
    // ratio.
    const bool ort_extra_threads = ort.cpu_ms > 1.05 * ort.median_ms * threads;
    const double headline = ort_extra_threads ? ratio(ort.median_ms, art_t.median_ms) : ratio(ort.cpu_ms, art_t.cpu_ms);
    const double headline_tuned = !art_tuned          ? 0.0
                                  : ort_extra_threads ? ratio(ort.median_ms, tuned_t.median_ms)
                                                      : ratio(ort.cpu_ms, tuned_t.cpu_ms);
    std::printf(" headline=%s untuned_vs_ort=%.2f", ort_extra_threads ? "wall" : "cpu", headline);
    // The binding's fixed cost per call taken off ONNX Runtime's wall time: what its kernels cost,
    // for a model of microseconds where that cost is most of the call.
    const double ort_net_ms = ort.median_ms > 0 ? ort.median_ms - ort_run.overhead.median_ms : -1;
    std::printf(" ort_call_overhead_ms=%.4f art_vs_ort_net=%.2f", ort_run.overhead.median_ms,
                ratio(ort_net_ms, art_t.median_ms));
    if (art_tuned) std::printf(" tuned_vs_ort_headline=%.2f", headline_tuned);
    std::printf("\n");
    std::fflush(stdout);
    if (per_op) {
      // Each node's time inside the model: its steps' medians over profiled runs of the artifact.
      const deploy::RunProfile profile = deploy::profile_runs(art->module, runs);
      std::map<std::string, double> in_model;
      for (size_t k = 0; k < profile.step_ms.size(); ++k) in_model[art->module.steps()[k].node] += profile.step_ms[k];
      if (art_tuned) print_tuned_per_op(name, art->module, profile, art_tuned->module, tuned_graph, lookup.get(), runs);
      // The model's libraries unloaded first: a library loaded while another is open can be
      // given the open one's handle (both come from a memory file whose descriptor, and so
      // /proc/self/fd path, is reused).
      art.reset();
      art_tuned.reset();
      print_per_op(name, optimized, ort_run.nodes, in_model, profile, runs);
    }
    if (headline > 0) {
      log_untuned += std::log(headline);
      if (art_tuned) log_tuned += std::log(headline_tuned);
      ++rated;
    }
  }
  if (rated > 0) {
    std::printf("geomean threads=%d models=%d untuned_vs_ort=%.2f", threads, rated, std::exp(log_untuned / rated));
    if (lookup) std::printf(" tuned_vs_ort=%.2f", std::exp(log_tuned / rated));
    std::printf("\n");
  }
  return 0;
}

int main(int argc, char **argv) {
  try {
    return run_bench(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "model_bench: %s\n", e.what());
    return 1;
  }
}
