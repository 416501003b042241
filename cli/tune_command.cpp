#include "cli/tune_command.h"

#include "cli/model_command.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_view.h"
#include "cli/table.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/driver/task_extraction.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"
#include "contracts/error.h"
#include "contracts/json.h"
#include "contracts/target.h"
#include "db/error.h"
#include "db/tuning_db.h"
#include "rpc_server/signals.h"
#include "tuner/db_config_lookup.h"
#include "tuner/measurer.h"
#include "tuner/presets.h"
#include "tuner/tuner.h"

namespace kiln::cli {

namespace {

struct TuneCommandOptions {
  std::string template_name, args;
  double weight = 1;
  std::string workloads_file;
  std::string preset;
  std::string model;                      // an ONNX model: its tasks, then its latency before and after
  std::vector<std::string> input_shapes;  // NAME=DIMS, for the model's symbolic input dimensions
  int64_t runs = 20;                      // timed runs of the model (after warm-up)
  int64_t trials = -1;                    // not given: 64 per task
  std::string time_budget;
  std::string strategy = "xgb";
  std::string db = "kiln.db";
  std::string target = "llvm -mcpu=native";
  std::string device_key = "local-cpu";
  int64_t batch = 16;
  int64_t early_stopping = 0;
  int64_t trials_per_task = 0;
  int64_t confirm_top = 0;
  int64_t confirm_repeats = 2;
  uint32_t threads = 0;
  bool flush = false;  // each call timed alone, its inputs flushed from the CPU caches first
  bool no_transfer = false;
  bool skip_measured = false;
  bool json = false;
  int64_t resume = 0;
  std::string name;
  uint64_t seed = 0;
  int priority = 0;
  // Whether --target and --device-key were given: a daemon uses its own when they were not.
  bool target_given = false, device_key_given = false;
  DaemonOptions daemon;
};

// The repeats of a candidate timed with --flush: one call each, so more of them than the tuner's
// default 3 repeats of calls grown to 10 ms.
constexpr uint32_t kFlushedRepeats = 10;

// "90", "90s", "10m", "2h" -> seconds.
double parse_duration(const std::string &text) {
  if (text.empty()) return 0;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception &) {
    throw UserError("--time-budget: '" + text + "' is not a duration such as 90s, 10m or 2h");
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (scale < 0 || !(value > 0) || !std::isfinite(value)) {
    throw UserError("--time-budget: '" + text + "' is not a duration such as 90s, 10m or 2h");
  }
  return value * scale;
}

// A model to tune: its graph after the passes the compiler runs (`kiln run --optimize`) and the
// tasks extracted from it.
struct ModelTasks {
  graph::Graph imported;  // before the passes: the layout pass takes its blocks from the configs
  graph::Graph graph;     // after the passes, with default configs (what the tasks come from)
  driver::TaskExtraction extraction;
  std::vector<tuner::TuneTask> tasks;
};

ModelTasks load_model(const TuneCommandOptions &o) {
  frontend::onnx::ImportOptions io;
  io.target = o.target;
  for (const std::string &text : o.input_shapes) {
    auto [name, shape] = parse_input_shape(text);
    if (io.input_shapes.count(name)) throw UserError("--input-shape " + name + " is given twice");
    io.input_shapes[name] = shape;
  }
  ModelTasks m;
  m.imported = frontend::onnx::import_model(o.model, io);
  m.graph = driver::optimize_graph_for_target(m.imported, o.target);
  m.extraction = driver::extract_tasks(m.graph, o.target);
  const driver::TaskExtraction &x = m.extraction;
  if (x.tasks.empty()) {
    throw UserError(
        fmt::format("{} has no tunable operators: its {} kernel node(s) are tensor-expression kernels, none "
                    "an operator template (convolutions, dense layers, matrix products)",
                    o.model, x.other_nodes));
  }
  for (const driver::ExtractedTask &t : x.tasks)
    m.tasks.push_back(
        {t.template_name, t.args, static_cast<double>(t.weight), t.template_name + " " + task_summary(t)});
  return m;
}

double share(double part, double total) { return total > 0 ? 100.0 * part / total : 0; }

void print_model_tasks(const TuneCommandOptions &o, const ModelTasks &m) {
  const driver::TaskExtraction &x = m.extraction;
  if (o.json) {
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const driver::ExtractedTask &t : x.tasks) {
      tasks.push_back({{"template", t.template_name},
                       {"shape", task_summary(t)},
                       {"weight", t.weight},
                       {"flops", t.flops},
                       {"flops_share", share(t.flops, x.total_flops())},
                       {"workload", t.workload_key},
                       {"nodes", t.nodes}});
    }
    nlohmann::ordered_json e = {{"event", "tasks"},
                                {"model", o.model},
                                {"nodes", m.graph.nodes().size()},
                                {"template_nodes", x.template_nodes},
                                {"other_nodes", x.other_nodes},
                                {"flops", x.total_flops()},
                                {"tunable_flops_share", share(x.template_flops, x.total_flops())},
                                {"tasks", tasks}};
    std::cout << e.dump() << "\n" << std::flush;
    return;
  }
  Table table({"TASK", "TEMPLATE", "SHAPE", "WEIGHT", "FLOPS %", "WORKLOAD"});
  for (size_t i = 0; i < x.tasks.size(); ++i) {
    const driver::ExtractedTask &t = x.tasks[i];
    table.add_row({std::to_string(i + 1), t.template_name, task_summary(t), std::to_string(t.weight),
                   fmt::format("{:.1f}", share(t.flops, x.total_flops())), t.workload_key.substr(0, 12)});
  }
  std::cout << o.model << " after the graph passes: " << m.graph.nodes().size() << " nodes\n";
  table.print(std::cout);
  std::cout
      << fmt::format(
             "{} tasks from {} template nodes ({:.1f}% of {:.2f} GFLOP); {} nodes are not tuned (tensor-expression "
             "kernels and layout transforms, {:.1f}%)\n\n",
             x.tasks.size(), x.template_nodes, share(x.template_flops, x.total_flops()), x.total_flops() / 1e9,
             x.other_nodes, share(x.other_flops, x.total_flops()))
      << std::flush;
}

// Random inputs for the graph: floats uniform in [-1, 1], integers 0 or 1 (valid indices for any
// gather or embedding).
std::vector<deploy::Tensor> random_inputs(const graph::Graph &g) {
  std::mt19937_64 rng(0x6b696c6e);
  std::vector<deploy::Tensor> inputs;
  for (graph::ValueId id : g.inputs()) {
    const graph::TensorType &type = g.value(id).type;
    deploy::Tensor t = deploy::Tensor::empty(type.shape, ir::to_deploy_dtype(type.dtype));
    if (t.dtype() == deploy::DType::of<float>()) {
      std::uniform_real_distribution<float> d(-1, 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = d(rng);
    } else if (t.dtype() == deploy::DType::of<int64_t>()) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int64_t>()[i] = static_cast<int64_t>(rng() & 1);
    } else if (t.dtype() == deploy::DType::of<int32_t>()) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = static_cast<int32_t>(rng() & 1);
    } else {
      std::memset(t.data(), 0, t.nbytes());
    }
    inputs.push_back(t);
  }
  return inputs;
}

struct ModelLatency {
  double median_s = 0;
  double compile_s = 0;
  int template_kernels = 0;
  int tuned_kernels = 0;
};

constexpr int kWarmupRuns = 3;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The model (`g`, as imported) optimized and compiled with each of `configs` (null: every template at
// its default config) and run on the same random inputs: the median of `runs` runs of each after
// kWarmupRuns, the compilations' runs interleaved so that each sees the same load of the machine.
std::vector<ModelLatency> measure_model(const graph::Graph &g, const std::string &target,
                                        const std::vector<const ops::ConfigLookup *> &configs, int64_t runs) {
  // Each lookup has its own graph: the layout takes the convolutions' blocks from the log.
  std::vector<std::unique_ptr<driver::GraphExecutor>> executors;
  for (const ops::ConfigLookup *c : configs) {
    driver::ExecutorOptions eo;
    eo.target = target;
    eo.configs = c;
    executors.push_back(std::make_unique<driver::GraphExecutor>(driver::optimize_graph_for_target(g, target, c), eo));
  }
  const std::vector<deploy::Tensor> inputs = random_inputs(g);
  for (const auto &ex : executors) {
    for (int i = 0; i < kWarmupRuns; ++i) ex->run(inputs);
  }
  std::vector<std::vector<double>> times(executors.size());
  for (int64_t i = 0; i < runs; ++i) {
    for (size_t k = 0; k < executors.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      executors[k]->run(inputs);
      times[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::vector<ModelLatency> result;
  for (size_t k = 0; k < executors.size(); ++k) {
    ModelLatency l;
    l.median_s = median(times[k]);
    l.compile_s = executors[k]->stats().compile_s;
    l.template_kernels = executors[k]->stats().template_kernels;
    l.tuned_kernels = executors[k]->stats().tuned_kernels;
    result.push_back(l);
  }
  return result;
}

// The model's latency with default configs and with the log's best ones for `target` and the device
// class `device_key`, and the speedup.
void report_model_latency(const TuneCommandOptions &o, const ModelTasks &m, db::TuningDb &log,
                          const std::string &target, const std::string &device_key) {
  if (!o.json) std::cout << "\ncompiling " << o.model << " with default and with tuned configs ...\n" << std::flush;
  tuner::DbConfigLookup lookup(log, device_key);
  const std::vector<ModelLatency> l = measure_model(m.imported, target, {nullptr, &lookup}, o.runs);
  const ModelLatency &before = l[0], &after = l[1];
  const double speedup = before.median_s / after.median_s;
  if (o.json) {
    nlohmann::ordered_json e = {{"event", "model"},
                                {"model", o.model},
                                {"runs", o.runs},
                                {"warmup_runs", kWarmupRuns},
                                {"default_s", before.median_s},
                                {"tuned_s", after.median_s},
                                {"speedup", speedup},
                                {"template_kernels", after.template_kernels},
                                {"tuned_kernels", after.tuned_kernels}};
    std::cout << e.dump() << "\n" << std::flush;
    return;
  }
  std::cout << fmt::format("{} of {} template kernels use tuned configs from {}\n", after.tuned_kernels,
                           after.template_kernels, o.db);
  Table t({"MODEL", "CONFIGS", "LATENCY MS", "COMPILE S"});
  t.add_row(
      {o.model, "default", fmt::format("{:.3f}", before.median_s * 1e3), fmt::format("{:.1f}", before.compile_s)});
  t.add_row({o.model, "tuned", fmt::format("{:.3f}", after.median_s * 1e3), fmt::format("{:.1f}", after.compile_s)});
  t.print(std::cout);
  std::cout << fmt::format(
      "speedup {:.2f}x (median of {} runs of each after {} warm-up runs, interleaved, on random inputs)\n", speedup,
      o.runs, kWarmupRuns);
}

// What to tune: the tasks of --model (extracted by load_model), --template, --workloads or --preset.
std::vector<tuner::TuneTask> read_tasks(const TuneCommandOptions &o, const ModelTasks *model) {
  std::vector<tuner::TuneTask> tasks;
  if (model) {
    tasks = model->tasks;
  } else if (!o.template_name.empty()) {
    if (o.args.empty()) throw UserError("--template needs --args (the template's arguments as JSON)");
    tasks.push_back({o.template_name, contracts::Json::parse(o.args), o.weight, ""});
  } else if (!o.workloads_file.empty()) {
    std::ifstream in(o.workloads_file);
    if (!in) throw UserError("cannot read " + o.workloads_file);
    std::stringstream text;
    text << in.rdbuf();
    const contracts::Json list = contracts::Json::parse(text.str());
    if (!list.is_array()) throw UserError(o.workloads_file + ": expected a JSON list of workloads");
    for (size_t i = 0; i < list.size(); ++i) {
      const contracts::Json &w = list[i];
      if (!w.is_object() || !w.contains("template") || !w.contains("args")) {
        throw UserError(o.workloads_file + ": workload " + std::to_string(i) +
                        " needs \"template\" and \"args\" (and may have \"weight\" and \"name\")");
      }
      tasks.push_back({w.at("template").as_string(), w.at("args"), w.get_or("weight", 1.0).as_double(),
                       w.get_or("name", "").as_string()});
    }
  } else {
    tasks = tuner::preset_tasks(o.preset);
  }
  return tasks;
}

// The job `kiln tune` asks for, the same whether it runs embedded or in the tuning service.
tuner::JobSubmission make_submission(const TuneCommandOptions &o, const ModelTasks *model) {
  tuner::JobSubmission sub;
  sub.tasks = read_tasks(o, model);
  tuner::TuneOptions &options = sub.options;
  options.strategy = o.strategy == "ga" ? "genetic" : o.strategy;
  options.trials = o.trials >= 0 ? o.trials : 64 * static_cast<int64_t>(sub.tasks.size());
  options.time_budget_s = parse_duration(o.time_budget);
  options.batch_size = o.batch;
  options.early_stopping = o.early_stopping;
  options.trials_per_task = o.trials_per_task;
  options.confirm_top = o.confirm_top;
  options.confirm_repeats = o.confirm_repeats;
  options.transfer = !o.no_transfer;
  options.skip_logged = o.skip_measured;
  options.seed = o.seed;
  options.priority = o.priority;
  if (o.threads > 0 || o.flush) {
    kiln::v1::MeasureOptions measure;
    if (o.threads > 0) measure.set_threads(o.threads);
    if (o.flush) {
      // AutoTVM's enable_cpu_cache_flush: one call per repeat, so that each timed call finds its
      // inputs (a layer's weights) in memory, as a model's layer does after the layers before it.
      measure.set_cpu_cache_flush(true);
      measure.set_number(1);
      measure.set_min_repeat_ms(0);
      measure.set_repeat(kFlushedRepeats);
    }
    options.measure = measure;
  }
  sub.name = !o.name.empty()            ? o.name
             : !o.model.empty()         ? std::filesystem::path(o.model).stem().string()
             : !o.preset.empty()        ? o.preset
             : !o.template_name.empty() ? o.template_name
                                        : o.workloads_file;
  sub.target = o.target;
  sub.device_key = o.device_key;
  return sub;
}

// SIGINT and SIGTERM back to their default action (after the job), with any pending one dropped.
void unblock_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const timespec none{0, 0};
  while (sigtimedwait(&set, nullptr, &none) > 0) {
  }
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void tune_embedded(const TuneCommandOptions &o) {
  // Ctrl-C (or SIGTERM) pauses the job: blocked in every thread from here on and taken by the
  // watcher below, which cancels the batch in flight; what was measured stays.
  rpc::block_shutdown_signals();
  // A model is read and its tasks extracted before anything is written: a bad model makes no job.
  std::optional<ModelTasks> model;
  if (!o.model.empty()) {
    model = load_model(o);
    print_model_tasks(o, *model);
  }
  db::TuningDbOptions db_options;
  db_options.create = o.resume == 0;  // a new job may start a log; resuming needs one
  db::TuningDb log = db::TuningDb::open(o.db, db_options);
  if (log.created() && !o.json) std::cerr << "created new tuning log " << log.path() << "\n";
  std::string target = o.target, device_key = o.device_key;
  int64_t job = o.resume;
  tuner::LocalMeasurerOptions lo;
  if (job > 0) {
    const std::optional<db::Job> existing = log.job(job);
    if (!existing) throw UserError("there is no job " + std::to_string(job) + " in " + o.db);
    target = existing->spec.value("target", target);
    device_key = existing->spec.value("device_key", device_key);
    // Measured as the job asks (--threads given when it was created), unless told otherwise now.
    if (existing->spec.contains("options")) {
      const tuner::TuneOptions stored =
          tuner::TuneOptions::from_json(contracts::Json::parse(existing->spec.at("options").dump()));
      if (stored.measure) lo.measure.MergeFrom(*stored.measure);
    }
  }
  std::optional<tuner::JobSubmission> sub;
  if (job == 0) {
    sub = make_submission(o, model ? &*model : nullptr);
    if (sub->options.measure) lo.measure.MergeFrom(*sub->options.measure);  // --threads, --flush
  }
  if (o.threads > 0) lo.measure.set_threads(o.threads);
  tuner::LocalMeasurer measurer(target, lo);
  tuner::Tuner tuner(log, measurer, target, device_key);

  if (sub) {
    job = tuner.create_job(sub->name, sub->tasks, sub->options);
    if (!o.json) {
      std::cerr << fmt::format("job {} in {}: {} tasks, {} trials\n", job, o.db, sub->tasks.size(),
                               sub->options.trials);
    }
  }

  std::atomic<bool> cancel{false}, finished{false};
  std::thread watcher([&] {
    rpc::wait_for_shutdown_signal();
    if (finished) return;
    cancel = true;
    measurer.cancel();
  });

  LiveView view(std::cout, o.json);
  tuner::JobStatus status;
  try {
    status = tuner.run(
        job, [&](const tuner::JobStatus &s) { view.update(s); }, &cancel);
  } catch (...) {
    finished = true;
    kill(getpid(), SIGTERM);
    watcher.join();
    throw;
  }
  finished = true;
  kill(getpid(), SIGTERM);
  watcher.join();

  view.update(status, true);
  if (!o.json) {
    std::cout << "\n";
    print_summary(std::cout, status);
    // A model's job is resumed with the model, so that it is measured at the end.
    std::string again = fmt::format("kiln tune --resume {} --db {}", job, o.db);
    if (model) again += " --model " + o.model;
    for (const std::string &s : o.input_shapes) again += " --input-shape " + s;
    print_end(std::cout, status, again);
  }
  // The model compiled with the log's best configs, against the defaults (a job paused, cancelled
  // or failed is not measured: the model is measured when it is done).
  if (model && status.state == "done") {
    unblock_shutdown_signals();
    report_model_latency(o, *model, log, target, device_key);
  }
}

// `kiln tune --daemon ... --resume JOB --model MODEL --db LOG`, the command that follows a model's
// job in the tuning service to its end and then measures the model with the job's records in `log`.
std::string daemon_model_command(const TuneCommandOptions &o, const std::string &address, int64_t job,
                                 const std::string &log) {
  std::string command = fmt::format("kiln tune --daemon {}", address);
  if (!o.daemon.token_file.empty()) command += " --token-file " + o.daemon.token_file;
  command += fmt::format(" --resume {} --model {}", job, o.model);
  for (const std::string &s : o.input_shapes) command += " --input-shape " + s;
  return command + " --db " + log;
}

// A model's job that the tuning service finished: the model compiled with the job's records and its
// latency before and after, as `kiln tune --model` measures it embedded. The records are read from
// --db, the service's tuning log (kilnd --db) as this machine sees it; when --db is not that log
// (it lacks the job as the service reports it) or the job's target is not this machine's, nothing
// is measured and the command that measures it is printed instead (with LOG for the service's log
// when --db is not it).
void report_daemon_model_latency(const TuneCommandOptions &o, const ModelTasks &m, const tuner::JobReport &end,
                                 const std::string &address) {
  const int64_t job = end.status.job_id;
  auto not_measured = [&](const std::string &why, const std::string &log) {
    const std::string command = daemon_model_command(o, address, job, log);
    if (o.json) {
      nlohmann::ordered_json e = {{"event", "model_not_measured"}, {"reason", why}, {"command", command}};
      std::cout << e.dump() << "\n" << std::flush;
      return;
    }
    std::cout << fmt::format("\n{} is not measured: {}.\nmeasure it with the job's records:  {}\n", o.model, why,
                             command);
  };
  std::optional<db::TuningDb> log;
  try {
    db::TuningDbOptions read;
    read.read_only = true;
    log.emplace(db::TuningDb::open(o.db, read));
  } catch (const db::TuningDbError &e) {
    return not_measured(
        fmt::format("the tuning service's log is not at {} ({}); give it (kilnd --db) as LOG", o.db, e.what()), "LOG");
  }
  const std::optional<db::Job> logged = log->job(job);
  if (!logged || logged->name != end.name || logged->state != db::JobState::kDone ||
      logged->trials_done != end.status.trials_done) {
    return not_measured(fmt::format("{} is not the tuning service's log (it does not hold job {} as the service "
                                    "reports it); give that log (kilnd --db) as LOG",
                                    o.db, job),
                        "LOG");
  }
  const std::string here = driver::concrete_target("llvm -mcpu=native");
  if (!contracts::same_target(driver::concrete_target(end.target), here)) {
    return not_measured(fmt::format("the job's target '{}' is not this machine's ('{}')", end.target, here), o.db);
  }
  unblock_shutdown_signals();
  report_model_latency(o, m, *log, end.target, end.device_key);
}

// The same job submitted to the tuning service and followed with the same view; Ctrl-C stops
// following, and the job goes on in the service. A model's job, once done, is compiled and measured
// (report_daemon_model_latency); with --resume and --model, a job already done is only measured.
void tune_in_daemon(const TuneCommandOptions &o) {
  // Before any thread starts (gRPC's too), so that Ctrl-C reaches the waiter of follow_job.
  rpc::block_shutdown_signals();
  TunerClient client(o.daemon);
  std::optional<ModelTasks> model;
  if (!o.model.empty()) {
    model = load_model(o);
    print_model_tasks(o, *model);
  }
  tuner::JobReport report;
  std::string done_already;
  if (o.resume > 0) {
    report = client.get(o.resume);
    if (!model || report.status.state != "done") {
      report = client.resume(o.resume);
    } else {
      done_already = "found done in";
    }
  } else {
    tuner::JobSubmission sub = make_submission(o, model ? &*model : nullptr);
    if (!o.target_given) sub.target.clear();
    if (!o.device_key_given) sub.device_key.clear();
    report = client.submit(sub);
  }
  const int64_t job = report.status.job_id;
  if (!o.json) {
    const std::string verb = !done_already.empty() ? done_already : o.resume > 0 ? "resumed in" : "submitted to";
    std::cerr << fmt::format("job {} {} the tuning service at {}: {} tasks, {} trials, {} on {}\n", job, verb,
                             client.address(), report.status.tasks.size(), report.status.trials_total, report.target,
                             report.device_key);
  }
  LiveView view(std::cout, o.json);
  const std::optional<tuner::JobReport> end = follow_job(client, job, view);
  const std::string daemon = "kiln jobs --daemon " + client.address();
  if (!end) {
    if (!o.json) {
      std::cout << fmt::format(
          "\nstopped following job {}; it goes on in the tuning service at {}.\n"
          "  watch it:  {} watch {}\n  pause it:  {} pause {}\n",
          job, client.address(), daemon, job, daemon, job);
      if (model) {
        std::cout << fmt::format("  measure {} when it is done:  {}\n", o.model,
                                 daemon_model_command(o, client.address(), job, o.db));
      }
    }
    return;
  }
  if (!o.json) {
    std::cout << "\n";
    print_summary(std::cout, end->status);
    print_end(std::cout, end->status, fmt::format("{} resume {}", daemon, job));
    if (end->status.state == "failed") throw UserError(fmt::format("job {} failed: {}", job, end->status.message));
  }
  // As embedded: a job paused or cancelled is not measured; the model is measured when it is done.
  if (model && end->status.state == "done") report_daemon_model_latency(o, *model, *end, client.address());
}

void tune_command(const TuneCommandOptions &o) {
  // What to tune, checked before the model is read or the log opened.
  const int sources =
      (!o.template_name.empty()) + (!o.workloads_file.empty()) + (!o.preset.empty()) + (!o.model.empty());
  if (o.resume == 0 && sources != 1) {
    throw UserError(
        "say what to tune with exactly one of --model FILE, --template T --args JSON, --workloads FILE or --preset "
        "NAME");
  }
  if (!o.input_shapes.empty() && o.model.empty()) throw UserError("--input-shape needs --model");
  if (o.daemon.address.empty()) {
    tune_embedded(o);
  } else {
    tune_in_daemon(o);
  }
}

}  // namespace

void resume_embedded(const std::string &db, int64_t job, bool json) {
  TuneCommandOptions o;
  o.db = db;
  o.resume = job;
  o.json = json;
  tune_embedded(o);
}

void add_tune_command(CLI::App &app) {
  auto o = std::make_shared<TuneCommandOptions>();
  CLI::App *c = app.add_subcommand("tune",
                                   "Tune operators or a model's operators: a job in the tuning log, measured on this "
                                   "machine in a local sandbox, or submitted to the tuning service (--daemon).");
  c->add_option("--template", o->template_name, "an operator template, e.g. dense_pack.x86 (see `kiln templates`)");
  c->add_option("--args", o->args, "the template's arguments as JSON");
  c->add_option("--weight", o->weight, "how often the workload occurs (with --template)")->capture_default_str();
  c->add_option("--workloads", o->workloads_file,
                "a JSON list of workloads: [{\"template\":..., \"args\":..., \"weight\":..., \"name\":...}]");
  c->add_option("--preset", o->preset, "a built-in task list: resnet18, bert-base");
  c->add_option("--model", o->model,
                "an ONNX model: tune the distinct operators of its optimized graph, then compare its latency with "
                "default and with tuned configs");
  c->add_option("--input-shape", o->input_shapes,
                "NAME=DIMS: fix a model input's shape, e.g. input=1,3,224,224 (for symbolic or unknown dimensions)");
  c->add_option("--runs", o->runs, "with --model: timed runs of the model per latency (the median is shown)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  c->add_option("--trials", o->trials, "measurements in all (default: 64 per task)");
  c->add_option("--time-budget", o->time_budget, "stop after this long, e.g. 90s, 10m, 2h");
  c->add_option("--strategy", o->strategy, "xgb, ga, random or grid")
      ->check(CLI::IsMember({"xgb", "ga", "genetic", "random", "grid"}))
      ->capture_default_str();
  c->add_option("--db", o->db,
                "the tuning log (created when missing); with --daemon and --model, the service's log (kilnd --db), "
                "read to measure the model with the job's records")
      ->capture_default_str();
  c->add_option("--target", o->target, "what to compile for")->capture_default_str();
  c->add_option("--device-key", o->device_key, "the device class the results are recorded under")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "configs measured per batch")->capture_default_str();
  c->add_option("--early-stopping", o->early_stopping, "a task stops after this many trials without improvement");
  c->add_option("--trials-per-task", o->trials_per_task, "at most this many trials for one task");
  c->add_option("--confirm-top", o->confirm_top,
                "when the search ends, time each task's K best configs and its default config again and rank "
                "them by the median of their timings (0: off)")
      ->capture_default_str();
  c->add_option("--confirm-repeats", o->confirm_repeats, "how many more times each of those is timed")
      ->capture_default_str();
  c->add_option("--threads", o->threads, "threads a candidate runs on (default: one per physical core)");
  c->add_flag("--flush", o->flush,
              "time each call of a candidate alone with its inputs flushed from the CPU caches first (number 1, " +
                  std::to_string(kFlushedRepeats) +
                  " repeats): the weights of a model's layer come from memory, not from the previous call's cache");
  c->add_option("--seed", o->seed, "seed of the search")->capture_default_str();
  c->add_option("--name", o->name, "the job's name in `kiln jobs list`");
  c->add_flag("--no-transfer", o->no_transfer, "do not learn from the log's records of other workloads");
  c->add_flag("--skip-measured", o->skip_measured,
              "never measure a config the log already holds for the same workload and target (from any job)");
  c->add_option("--resume", o->resume, "go on with a paused or interrupted job");
  c->add_option("--priority", o->priority, "with --daemon: higher runs first (-1000 to 1000)")->capture_default_str();
  add_daemon_options(c, o->daemon);
  c->add_flag("--json", o->json, "one JSON event per batch, for scripts");
  c->footer(
      "Examples:\n"
      "  kiln tune --model resnet18.onnx --trials 600\n"
      "  kiln tune --preset resnet18 --trials 600\n"
      "  kiln tune --template dense_pack.x86 --args "
      "'{\"data\":{\"shape\":[64,512]},\"weight\":{\"shape\":[1000,512]}}'\n"
      "  kiln tune --daemon 127.0.0.1:9290 --token-file kiln.token --preset bert-base\n"
      "Ctrl-C pauses the job; `kiln tune --resume JOB` goes on. With --daemon, Ctrl-C stops following the\n"
      "job, which goes on in the service.");
  c->callback([o, c] {
    o->target_given = c->count("--target") > 0;
    o->device_key_given = c->count("--device-key") > 0;
    tune_command(*o);
  });
}

}  // namespace kiln::cli
