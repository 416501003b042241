#include "cli/model_command.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/table.h"
#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/task_extraction.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "db/tuning_db.h"
#include "tuner/db_config_lookup.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ops/config_lookup.h"
#include "contracts/error.h"
#include "contracts/json.h"
#include "deploy/graph_module.h"
#include "deploy/npy.h"

namespace kiln::cli {

std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string &text) {
  const std::string form = " (NAME=DIMS, e.g. input=1,3,224,224 or input=1x3x224x224; 'scalar' for rank 0)";
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError("--input-shape '" + text + "' is not NAME=DIMS" + form);
  const std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
  std::vector<int64_t> shape;
  if (dims == "scalar") return {name, shape};
  size_t p = 0;
  while (p <= dims.size()) {
    size_t e = dims.find_first_of(",x", p);
    if (e == std::string::npos) e = dims.size();
    const std::string part = dims.substr(p, e - p);
    if (part.empty() || part.size() > 12 || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(part) == 0)
      throw UserError("--input-shape " + text + ": '" + part + "' is not a positive dimension" + form);
    shape.push_back(std::stoll(part));
    p = e + 1;
  }
  return {name, shape};
}

namespace {

// "1x64x56x56": a tensor argument's shape.
std::string shape_text(const contracts::Json &tensor) {
  const contracts::Json *shape = tensor.is_object() ? tensor.find("shape") : nullptr;
  if (!shape || !shape->is_array()) return "?";
  std::string s;
  for (size_t i = 0; i < shape->size(); ++i) s += (i ? "x" : "") + std::to_string((*shape)[i].as_int());
  return s;
}

}  // namespace

std::string task_summary(const driver::ExtractedTask &t) {
  std::string s;
  for (const auto &[key, value] : t.args.as_object()) {
    if (!value.is_object() || !value.contains("shape")) continue;
    s += (s.empty() ? "" : " * ") + shape_text(value);
  }
  if (const contracts::Json *strides = t.args.find("strides")) {
    bool ones = true;
    for (size_t i = 0; i < strides->size(); ++i) ones = ones && (*strides)[i].as_int() == 1;
    if (!ones) s += " stride " + std::to_string((*strides)[0].as_int());
  }
  return s;
}

namespace {

using ::kiln::detail::concat;
using nlohmann::ordered_json;

struct ModelOptions {
  std::string model;
  std::vector<std::string> inputs;        // NAME=FILE
  std::vector<std::string> input_shapes;  // NAME=1x3x224x224
  std::vector<std::string> const_inputs;  // NAME=FILE
  std::string output_dir;
  std::string target = "llvm -mcpu=native";
  bool json = false;
  bool print_graph = false;
  bool optimize = false;
  std::string db;  // the tuning log whose best configs the template kernels use
  std::string device_key = "local-cpu";
  int bench = 0;    // runs timed after a warm-up (kiln run --bench)
  int profile = 0;  // profiled runs after a warm-up (kiln run --profile)
  bool profile_given = false;
  std::string profile_json;  // where --profile's table is written as JSON
  std::string output;        // the artifact (kiln compile -o)
};

std::pair<std::string, std::string> split_assignment(const std::string &s, const char *option) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw UserError(concat(option, " takes NAME=VALUE, got '", s, "'"));
  return {s.substr(0, eq), s.substr(eq + 1)};
}

// A tensor file: .npy, or an ONNX TensorProto (.pb).
deploy::Tensor read_tensor(const std::string &path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".pb") return frontend::onnx::read_tensor_file(path);
  return deploy::read_npy(path);
}

frontend::onnx::ImportOptions import_options(const ModelOptions &o, std::map<std::string, deploy::Tensor> *inputs) {
  frontend::onnx::ImportOptions opt;
  opt.target = o.target;
  for (const auto &s : o.input_shapes) {
    auto [name, shape] = parse_input_shape(s);
    if (opt.input_shapes.count(name)) throw UserError(concat("--input-shape ", name, " is given twice"));
    opt.input_shapes[name] = shape;
  }
  for (const auto &s : o.const_inputs) {
    auto [name, file] = split_assignment(s, "--const-input");
    opt.frozen_inputs[name] = read_tensor(file);
  }
  if (inputs) {
    for (const auto &s : o.inputs) {
      auto [name, file] = split_assignment(s, "--input");
      if (inputs->count(name)) throw UserError(concat("--input ", name, " is given twice"));
      (*inputs)[name] = read_tensor(file);
      // An input file fixes the input's shape unless --input-shape says otherwise.
      if (!opt.input_shapes.count(name)) opt.input_shapes[name] = (*inputs)[name].shape();
    }
  }
  return opt;
}

std::string dims_text(const std::vector<std::string> &dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "," : "") + dims[k];
  return s + "]";
}

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "K", "M", "G", "T"};
  int k = 0;
  while (v >= 1000 && k < 4) {
    v /= 1000;
    ++k;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, k ? "%.2f %s%s" : "%.0f %s%s", v, prefix[k], unit);
  return buf;
}

// The tuning log of --db and its lookup for --device-key; no lookup without --db.
struct ConfigSource {
  std::unique_ptr<db::TuningDb> log;
  std::unique_ptr<tuner::DbConfigLookup> lookup;
  explicit ConfigSource(const ModelOptions &o) {
    if (o.db.empty()) return;
    db::TuningDbOptions dbo;
    dbo.read_only = true;
    log = std::make_unique<db::TuningDb>(db::TuningDb::open(o.db, dbo));
    lookup = std::make_unique<tuner::DbConfigLookup>(*log, o.device_key);
  }
};

// Writes each output as NAME.npy in `dir` (created when missing), adds a row per output to `t` and
// returns the outputs as JSON.
ordered_json write_outputs(const std::string &dir, const std::vector<std::string> &names,
                           const std::vector<deploy::Tensor> &out, Table &t) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(concat("cannot create ", dir, ": ", ec.message()));
  ordered_json outs = ordered_json::array();
  for (size_t k = 0; k < out.size(); ++k) {
    std::string file_name = names[k];
    for (char &c : file_name) {
      if (c == '/' || c == '\\' || c == '\0') c = '_';
    }
    if (file_name.empty() || file_name == "." || file_name == "..") file_name = concat("output_", k);
    const std::string path = (std::filesystem::path(dir) / (file_name + ".npy")).string();
    deploy::write_npy(path, out[k]);
    std::string type = out[k].dtype().to_string() + "[";
    for (size_t d = 0; d < out[k].shape().size(); ++d) type += (d ? "," : "") + std::to_string(out[k].shape()[d]);
    type += "]";
    t.add_row({names[k], type, path});
    outs.push_back({{"name", names[k]}, {"type", type}, {"file", path}});
  }
  return outs;
}

// Runs `run_once` a few times to warm up, then `n` times; the latency percentiles as JSON (runs,
// warmup, p50_ms, p90_ms, p99_ms, mean_ms).
ordered_json bench(int n, const std::function<void()> &run_once) {
  const int warmup = std::min(n, 5);
  for (int i = 0; i < warmup; ++i) run_once();
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    const size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ms.size()))) - 1;
    return ms[std::min(i, ms.size() - 1)];
  };
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  ordered_json j;
  j["runs"] = n;
  j["warmup"] = warmup;
  j["p50_ms"] = pct(50);
  j["p90_ms"] = pct(90);
  j["p99_ms"] = pct(99);
  j["mean_ms"] = mean;
  return j;
}

// bench() as one line of text.
void print_bench(int n, const std::function<void()> &run_once) {
  const ordered_json b = bench(n, run_once);
  std::printf("bench runs=%d warmup=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f mean_ms=%.3f\n", b["runs"].get<int>(),
              b["warmup"].get<int>(), b["p50_ms"].get<double>(), b["p90_ms"].get<double>(), b["p99_ms"].get<double>(),
              b["mean_ms"].get<double>());
}

void run_inspect(const ModelOptions &o) {
  frontend::onnx::ModelInfo info = frontend::onnx::inspect_model(o.model);
  // Import it too when every op is supported, for the static figures.
  std::optional<graph::Graph> g;
  std::string import_error;
  if (info.unsupported.empty()) {
    try {
      g = frontend::onnx::import_model(o.model, import_options(o, nullptr));
    } catch (const UserError &e) {
      import_error = e.what();
    }
  }
  double flops = 0;
  std::map<std::string, int64_t> graph_ops;
  if (g) {
    for (const auto &n : g->nodes()) {
      flops += graph::node_flops(*g, n);
      ++graph_ops[n.op];
    }
  }
  if (o.json) {
    ordered_json j;
    j["model"] = o.model;
    j["ir_version"] = info.ir_version;
    j["opset"] = info.opset;
    j["producer"] = info.producer;
    auto io = [](const std::vector<frontend::onnx::ModelInfo::Io> &v) {
      ordered_json a = ordered_json::array();
      for (const auto &x : v) a.push_back({{"name", x.name}, {"dtype", x.dtype}, {"shape", x.dims}});
      return a;
    };
    j["inputs"] = io(info.inputs);
    j["outputs"] = io(info.outputs);
    j["ops"] = info.op_counts;
    j["initializers"] = info.initializers;
    j["parameters"] = info.parameters;
    ordered_json un = ordered_json::array();
    for (const auto &u : info.unsupported)
      un.push_back({{"domain", u.domain}, {"op_type", u.op_type}, {"opset", u.opset}, {"nodes", u.nodes}});
    j["unsupported"] = un;
    if (g) {
      j["graph"] = {{"nodes", g->nodes().size()}, {"ops", graph_ops}, {"flops", flops}};
    }
    if (!import_error.empty()) j["import_error"] = import_error;
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_fields(std::cout, {{"model", o.model},
                           {"opset", std::to_string(info.opset)},
                           {"ir version", std::to_string(info.ir_version)},
                           {"producer", info.producer.empty() ? "-" : info.producer},
                           {"parameters", concat(info.parameters, " in ", info.initializers, " initializers")}});
  std::cout << "\n";
  Table io({"", "NAME", "DTYPE", "SHAPE"});
  for (const auto &x : info.inputs) io.add_row({"input", x.name, x.dtype, dims_text(x.dims)});
  for (const auto &x : info.outputs) io.add_row({"output", x.name, x.dtype, dims_text(x.dims)});
  io.print(std::cout);
  std::cout << "\n";
  Table ops({"OP", "NODES", "SUPPORTED"});
  std::map<std::string, bool> bad;
  for (const auto &u : info.unsupported) bad[(u.domain.empty() ? "" : u.domain + ".") + u.op_type] = true;
  for (const auto &[op, c] : info.op_counts) ops.add_row({op, std::to_string(c), bad.count(op) ? "no" : "yes"});
  ops.print(std::cout);
  std::cout << "\n";
  if (!info.unsupported.empty()) {
    std::cout << info.unsupported.size() << " op type(s) are not supported:";
    for (const auto &u : info.unsupported)
      std::cout << " " << (u.domain.empty() ? "" : u.domain + ".") << u.op_type << " (opset " << u.opset << ", "
                << u.nodes << " nodes)";
    std::cout << "\n";
  } else if (g) {
    std::cout << "after import and constant folding: " << g->nodes().size() << " nodes, " << human(flops, "FLOP")
              << " per run\n";
  } else {
    std::cout << "import failed: " << import_error << "\n";
  }
}

// Where each template kernel's config came from (with --db), the count of defaults and how to tune
// them: one `kiln tune` command per kernel.
void print_config_sources(const ModelOptions &o, const std::vector<driver::KernelReport> &templates) {
  std::cout << "\n";
  Table k({"NODE", "TEMPLATE", "CONFIG", "WORKLOAD"});
  int defaults = 0;
  auto is_default = [](const driver::KernelReport &r) {
    return r.source == driver::KernelReport::Source::kDefault || r.source == driver::KernelReport::Source::kStale;
  };
  for (const auto &r : templates) {
    k.add_row({r.node, r.template_name, driver::source_name(r.source), r.workload_key.substr(0, 12)});
    if (is_default(r)) ++defaults;
  }
  k.print(std::cout);
  const int tuned = static_cast<int>(templates.size()) - defaults;
  const std::string tune = concat("kiln tune --db ", o.db, " --target '", o.target, "' --device-key ", o.device_key);
  std::printf("%d of %zu template kernels use tuned configs from %s; %d use the default config\n", tuned,
              templates.size(), o.db.c_str(), defaults);
  if (defaults) {
    std::cout << "to tune them:\n";
    for (const auto &r : templates) {
      if (is_default(r))
        std::cout << "  " << tune << " --template " << r.template_name << " --args '" << r.args_json << "'\n";
    }
  }
}

// --profile: each step's median time over `o.profile` profiled runs (deploy::profile_runs), as a
// table sorted by time, the steps' sum against the plain runs' median; with --profile-json the
// same as JSON, whose "traceEvents" (the steps of the median profiled run) open in a trace viewer.
// With --json, the JSON's fields are added to `doc`, the one document `kiln run` prints, instead.
void print_profile(const ModelOptions &o, deploy::GraphModule &m, ordered_json &doc) {
  std::ofstream json;
  if (!o.profile_json.empty()) {
    json.open(o.profile_json);
    if (!json) throw UserError(concat("--profile-json: cannot write ", o.profile_json, ": ", std::strerror(errno)));
  }
  const deploy::RunProfile p = deploy::profile_runs(m, o.profile);
  const std::vector<deploy::GraphStep> &steps = m.steps();
  double sum = 0;
  for (double ms : p.step_ms) sum += ms;
  std::vector<size_t> order(steps.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p.step_ms[a] > p.step_ms[b]; });
  auto fixed = [](double v, int digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return std::string(buf);
  };
  if (!o.json) {
    std::cout << "\n";
    Table t({"STEP", "NODE", "OP", "KERNEL", "MEDIAN_MS", "SHARE_%"});
    for (size_t k : order)
      t.add_row({std::to_string(k), steps[k].node, steps[k].op, steps[k].kernel, fixed(p.step_ms[k], 4),
                 fixed(sum > 0 ? 100 * p.step_ms[k] / sum : 0, 1)});
    t.print(std::cout);
    std::printf(
        "profile runs=%d warmup=%d steps=%zu steps_sum_ms=%.3f profiled_run_ms=%.3f run_ms=%.3f (steps' medians "
        "summed, the median profiled run's steps, the median plain run)\n",
        p.runs, p.warmup, steps.size(), sum, p.steps_ms, p.run_ms);
  }
  if (!o.profile_json.empty() || o.json) {
    ordered_json j;
    j["model"] = o.model;
    j["runs"] = p.runs;
    j["warmup"] = p.warmup;
    j["steps_sum_ms"] = sum;
    j["profiled_run_ms"] = p.steps_ms;
    j["run_ms"] = p.run_ms;
    ordered_json rows = ordered_json::array(), trace = ordered_json::array();
    double ts = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      rows.push_back({{"step", k},
                      {"node", steps[k].node},
                      {"op", steps[k].op},
                      {"kernel", steps[k].kernel},
                      {"median_ms", p.step_ms[k]},
                      {"share", sum > 0 ? p.step_ms[k] / sum : 0.0}});
      trace.push_back({{"name", steps[k].node},
                       {"cat", steps[k].op},
                       {"ph", "X"},
                       {"ts", ts * 1e3},
                       {"dur", p.typical_ms[k] * 1e3},
                       {"pid", 0},
                       {"tid", 0},
                       {"args", {{"step", k}, {"kernel", steps[k].kernel}}}});
      ts += p.typical_ms[k];
    }
    j["steps"] = rows;
    j["traceEvents"] = trace;
    if (o.json) doc.update(j);
    if (json.is_open()) {
      json << j.dump(2) << "\n";
      json.close();
      if (!json) throw UserError(concat("--profile-json: cannot write ", o.profile_json));
    }
  }
}

// `kiln run model.kiln`: a compiled artifact through the deploy runtime.
void run_artifact(const ModelOptions &o) {
  if (!o.input_shapes.empty() || !o.const_inputs.empty() || o.optimize || !o.db.empty())
    throw UserError(concat(o.model,
                           " is a compiled model: its shapes, constants, passes and configs were fixed by kiln "
                           "compile (--input-shape, --const-input, --optimize and --db do not apply)"));
  const auto t0 = std::chrono::steady_clock::now();
  deploy::GraphModule m = deploy::GraphModule::load(o.model);
  const auto t1 = std::chrono::steady_clock::now();
  std::map<std::string, bool> given;
  for (const auto &s : o.inputs) {
    auto [name, file] = split_assignment(s, "--input");
    if (given.count(name)) throw UserError(concat("--input ", name, " is given twice"));
    given[name] = true;
    m.set_input(name, read_tensor(file));
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < m.inputs().size(); ++i) {
    const auto &in = m.inputs()[i];
    if (given.count(in.name)) continue;
    if (o.bench > 0 || o.profile > 0) {
      // Benchmarking needs no particular data: zeros.
      deploy::Tensor zeros = deploy::Tensor::empty(in.shape, in.dtype);
      if (zeros.nbytes()) std::memset(zeros.data(), 0, zeros.nbytes());
      m.set_input(static_cast<int>(i), zeros);
      continue;
    }
    std::string shape;
    for (size_t d = 0; d < in.shape.size(); ++d) shape += (d ? "," : "") + std::to_string(in.shape[d]);
    missing.push_back(concat(in.name, " (", in.dtype.to_string(), "[", shape, "])"));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto &x : missing) list += (list.empty() ? "" : ", ") + x;
    throw UserError(concat("no --input for ", list));
  }
  m.run();
  const auto t2 = std::chrono::steady_clock::now();
  // With --json, what each option reports goes into one document, printed at the end: the outputs
  // (--output-dir), "bench" (--bench) and the profile's fields (--profile).
  ordered_json doc = ordered_json::object();
  if (!o.output_dir.empty()) {
    std::vector<std::string> names;
    std::vector<deploy::Tensor> out;
    for (size_t k = 0; k < m.outputs().size(); ++k) {
      names.push_back(m.outputs()[k].name);
      out.push_back(m.get_output(static_cast<int>(k)));
    }
    Table t({"OUTPUT", "TYPE", "FILE"});
    const ordered_json outs = write_outputs(o.output_dir, names, out, t);
    if (o.json) {
      doc["outputs"] = outs;
      doc["arena_bytes"] = m.arena_bytes();
      doc["load_s"] = std::chrono::duration<double>(t1 - t0).count();
      doc["run_s"] = std::chrono::duration<double>(t2 - t1).count();
    } else {
      t.print(std::cout);
    }
  }
  if (!o.json)
    std::printf("compiled model for '%s': load %.3f s, first run %.3f s, arena %s\n", m.target().c_str(),
                std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                human(static_cast<double>(m.arena_bytes()), "B").c_str());
  if (o.bench > 0) {
    if (o.json)
      doc["bench"] = bench(o.bench, [&] { m.run(); });
    else
      print_bench(o.bench, [&] { m.run(); });
  }
  if (o.profile > 0) print_profile(o, m, doc);
  if (o.json) std::cout << doc.dump(2) << "\n";
}

void run_model(const ModelOptions &o) {
  if (o.profile_given && o.profile < 1)
    throw UserError(concat("--profile takes a number of runs of at least 1, got ", o.profile));
  if (!o.profile_json.empty() && !o.profile_given) throw UserError("--profile-json needs --profile N");
  if (o.output_dir.empty() && o.bench <= 0 && !o.profile_given)
    throw UserError("kiln run needs --output-dir (or --bench N, or --profile N)");
  if (deploy::is_artifact(o.model)) return run_artifact(o);
  if (o.profile_given)
    throw UserError(
        concat("--profile times the steps of a compiled model (kiln compile -o model.kiln); ", o.model, " is not one"));
  std::map<std::string, deploy::Tensor> inputs;
  frontend::onnx::ImportOptions opt = import_options(o, &inputs);
  const auto t0 = std::chrono::steady_clock::now();
  graph::Graph g = frontend::onnx::import_model(o.model, opt);
  std::vector<std::string> missing;
  for (graph::ValueId id : g.inputs()) {
    const auto &v = g.value(id);
    if (!inputs.count(v.name)) missing.push_back(concat(v.name, " (", v.type.str(), ")"));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto &m : missing) list += (list.empty() ? "" : ", ") + m;
    throw UserError(concat("no --input for ", list));
  }
  driver::ExecutorOptions eo;
  eo.target = o.target;
  ConfigSource configs(o);
  eo.configs = configs.lookup.get();
  if (o.optimize) g = driver::optimize_graph_for_target(g, o.target, eo.configs);
  driver::GraphExecutor ex(std::move(g), eo);
  const auto t1 = std::chrono::steady_clock::now();
  if (o.print_graph) std::cout << graph::print(ex.graph());
  std::vector<deploy::Tensor> out = ex.run(inputs);
  const auto t2 = std::chrono::steady_clock::now();
  const double import_s = std::chrono::duration<double>(t1 - t0).count();
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  std::vector<std::string> names;
  for (graph::ValueId id : ex.graph().outputs()) names.push_back(ex.graph().value(id).name);
  // Without --output-dir (--bench alone), the outputs are not written.
  Table t({"OUTPUT", "TYPE", "FILE"});
  const ordered_json outs = o.output_dir.empty() ? ordered_json() : write_outputs(o.output_dir, names, out, t);
  const auto &st = ex.stats();
  if (o.json) {
    ordered_json j;
    if (!o.output_dir.empty()) j["outputs"] = outs;
    j["nodes"] = st.nodes;
    j["kernels"] = st.kernels;
    j["template_kernels"] = st.template_kernels;
    j["tuned_kernels"] = st.tuned_kernels;
    ordered_json tk = ordered_json::array();
    for (const auto &r : st.templates)
      tk.push_back({{"node", r.node},
                    {"template", r.template_name},
                    {"workload_key", r.workload_key},
                    {"config", driver::source_name(r.source)}});
    j["templates"] = tk;
    j["compile_s"] = import_s;
    j["run_s"] = run_s;
    if (o.bench > 0) j["bench"] = bench(o.bench, [&] { ex.run(inputs); });
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (!o.output_dir.empty()) t.print(std::cout);
  if (configs.lookup) print_config_sources(o, st.templates);
  std::printf("%d nodes, %d kernels (%d from operator templates); import and compile %.2f s, run %.3f s\n", st.nodes,
              st.kernels, st.template_kernels, import_s, run_s);
  if (o.bench > 0) print_bench(o.bench, [&] { ex.run(inputs); });
}

// One tuning task of a compiled model (its fused kernels share the anchor's workload) and where its
// config came from: the worst of its kernels' sources (one kernel at the default makes the task's
// config a default), and the log's record that kernel's config came from.
struct TaskSource {
  driver::ExtractedTask task;
  driver::KernelReport::Source source = driver::KernelReport::Source::kDefault;
  std::optional<ops::TunedConfig> record;
  bool is_default() const {
    return source == driver::KernelReport::Source::kDefault || source == driver::KernelReport::Source::kStale;
  }
};

std::vector<TaskSource> task_sources(const graph::Graph &g, const std::string &target,
                                     const std::vector<driver::KernelReport> &kernels) {
  using Source = driver::KernelReport::Source;
  auto rank = [](Source s) {
    switch (s) {
      case Source::kExact:
        return 0;
      case Source::kDeviceClass:
        return 1;
      case Source::kDefault:
        return 2;
      case Source::kStale:
        return 3;
    }
    return 3;
  };
  std::vector<TaskSource> out;
  for (driver::ExtractedTask &t : driver::extract_tasks(g, target).tasks) {
    TaskSource s;
    bool seen = false;
    for (const driver::KernelReport &k : kernels) {
      if (k.workload_key != t.workload_key) continue;
      if (!seen || rank(k.source) > rank(s.source)) {
        s.source = k.source;
        s.record = k.record;
      }
      seen = true;
    }
    s.task = std::move(t);
    out.push_back(std::move(s));
  }
  return out;
}

const char *task_source_name(driver::KernelReport::Source s) {
  switch (s) {
    case driver::KernelReport::Source::kExact:
      return "exact target";
    case driver::KernelReport::Source::kDeviceClass:
      return "device class";
    case driver::KernelReport::Source::kDefault:
      return "default";
    case driver::KernelReport::Source::kStale:
      return "default (stale record)";
  }
  return "?";
}

// Where each task's config came from (--db), one row per task with its weight, then one line
// counting the defaults with the `kiln tune` command that tunes them: their workloads (with their
// weights) are written to `workloads_file`, which that command reads.
void print_task_sources(const ModelOptions &o, const std::vector<TaskSource> &tasks,
                        const std::string &workloads_file) {
  std::cout << "\n";
  Table t({"TASK", "TEMPLATE", "SHAPE", "WEIGHT", "NODES", "CONFIG", "RECORD", "WORKLOAD"});
  int defaults = 0, exact = 0, device_class = 0;
  ordered_json list = ordered_json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskSource &s = tasks[i];
    const driver::ExtractedTask &task = s.task;
    std::string nodes = task.nodes.empty() ? "-" : task.nodes[0];
    if (task.nodes.size() > 1) nodes += concat(" +", task.nodes.size() - 1);
    std::string record = "-";
    if (s.record) {
      char mean[32];
      std::snprintf(mean, sizeof mean, "%.1f us", s.record->mean_s * 1e6);
      record = concat(s.record->target, " on ", o.device_key, ", ", mean);
    }
    t.add_row({std::to_string(i + 1), task.template_name, task_summary(task), std::to_string(task.weight), nodes,
               task_source_name(s.source), record, task.workload_key.substr(0, 12)});
    if (s.is_default()) {
      ++defaults;
      list.push_back({{"template", task.template_name},
                      {"args", ordered_json::parse(task.args.dump())},
                      {"weight", task.weight},
                      {"name", task.template_name + " " + task_summary(task)}});
    } else if (s.source == driver::KernelReport::Source::kExact) {
      ++exact;
    } else {
      ++device_class;
    }
  }
  t.print(std::cout);
  const std::string counts =
      concat(defaults, " of ", tasks.size(), " tasks use the default config (", exact, " tuned on the exact target, ",
             device_class, " on another target of device class ", o.device_key, ", from ", o.db, ")");
  if (!defaults) {
    std::cout << counts << "\n";
    return;
  }
  std::ofstream out(workloads_file);
  out << list.dump(2) << "\n";
  if (!out) throw UserError(concat("cannot write ", workloads_file));
  std::cout << counts << "; to tune them: kiln tune --db " << o.db << " --target '" << o.target << "' --device-key "
            << o.device_key << " --workloads " << workloads_file << "\n";
}

// `kiln compile`: import, optimize, compile into one artifact.
void run_compile(const ModelOptions &o) {
  const auto t0 = std::chrono::steady_clock::now();
  graph::Graph g = frontend::onnx::import_model(o.model, import_options(o, nullptr));
  ConfigSource configs(o);
  const ops::ConfigLookup *lookup = configs.lookup.get();
  g = driver::optimize_graph_for_target(g, o.target, lookup);
  if (o.print_graph) std::cout << graph::print(g);
  driver::GraphCompileOptions co;
  co.kernels.target = o.target;
  co.kernels.configs = lookup;
  driver::GraphCompileReport r = driver::compile_graph(g, o.output, co);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<TaskSource> tasks;
  if (lookup) tasks = task_sources(g, o.target, r.templates);
  if (o.json) {
    ordered_json j;
    j["artifact"] = o.output;
    j["nodes"] = r.nodes;
    j["steps"] = r.steps;
    j["kernels"] = r.kernels;
    j["template_kernels"] = r.template_kernels;
    j["tuned_kernels"] = r.tuned_kernels;
    ordered_json tk = ordered_json::array();
    for (const auto &k : r.templates)
      tk.push_back({{"node", k.node},
                    {"template", k.template_name},
                    {"workload_key", k.workload_key},
                    {"config", driver::source_name(k.source)}});
    j["templates"] = tk;
    if (lookup) {
      ordered_json ts = ordered_json::array();
      for (const TaskSource &s : tasks) {
        ordered_json e = {{"template", s.task.template_name},
                          {"shape", task_summary(s.task)},
                          {"weight", s.task.weight},
                          {"nodes", s.task.nodes},
                          {"workload_key", s.task.workload_key},
                          {"config", task_source_name(s.source)}};
        if (s.record)
          e["record"] = {{"target", s.record->target}, {"device_key", o.device_key}, {"mean_s", s.record->mean_s}};
        ts.push_back(e);
      }
      j["tasks"] = ts;
    }
    j["arena_bytes"] = r.arena_bytes;
    j["unplanned_bytes"] = r.unplanned_bytes;
    j["in_place"] = r.in_place;
    j["concats_in_place"] = r.concats_in_place;
    j["params_bytes"] = r.params_bytes;
    j["file_bytes"] = r.file_bytes;
    j["compile_s"] = total_s;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("wrote %s: %s, %d nodes, %d kernel calls, %d kernels (%d from operator templates), compiled in %.2f s\n",
              o.output.c_str(), human(static_cast<double>(r.file_bytes), "B").c_str(), r.nodes, r.steps, r.kernels,
              r.template_kernels, total_s);
  std::printf(
      "memory plan: peak %s of %s without reuse (%.1f%%), %d in place, %d concats without a copy; parameters %s\n",
      human(static_cast<double>(r.arena_bytes), "B").c_str(),
      human(static_cast<double>(r.unplanned_bytes), "B").c_str(),
      r.unplanned_bytes ? 100.0 * static_cast<double>(r.arena_bytes) / static_cast<double>(r.unplanned_bytes) : 100.0,
      r.in_place, r.concats_in_place, human(static_cast<double>(r.params_bytes), "B").c_str());
  std::fflush(stdout);
  if (lookup) print_task_sources(o, tasks, o.output + ".tune.json");
}

void add_model_options(CLI::App *c, ModelOptions &o) {
  c->add_option("model", o.model, "the ONNX model file")->required();
  c->add_option("--input-shape", o.input_shapes,
                "NAME=DIMS: fix an input's shape, e.g. x=1x3x640x640 (for symbolic or unknown dimensions)");
  c->add_option("--const-input", o.const_inputs,
                "NAME=FILE: freeze an input to the tensor in FILE (.npy or .pb), e.g. a shape or an axis given as an "
                "input");
  c->add_option("--target", o.target, "the target to compile for")->capture_default_str();
  c->add_flag("--json", o.json, "print JSON");
}

}  // namespace

void add_model_commands(CLI::App &app) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App *run = app.add_subcommand(
      "run",
      "run an ONNX model through Kiln's reference executor, or a compiled model (kiln compile) through the runtime");
  add_model_options(run, *o);
  run->add_option("--input", o->inputs, "NAME=FILE: an input tensor (.npy or ONNX TensorProto .pb)");
  run->add_option("--output-dir", o->output_dir, "where each output is written as NAME.npy");
  run->add_option("--bench", o->bench, "after the run, time N more runs (after a warm-up) and print p50/p90/p99/mean")
      ->check(CLI::Range(1, 1000000));
  CLI::Option *profile =
      run->add_option("--profile", o->profile,
                      "for a compiled model: after a warm-up, N profiled runs; print each step's median time (node, "
                      "op, kernel, share), sorted by time, and the steps' sum against a plain run's median");
  run->add_option("--profile-json", o->profile_json,
                  "with --profile: write the table to FILE as JSON (with \"traceEvents\" for a trace viewer)");
  run->add_flag("--print-graph", o->print_graph, "print the graph after import (and the passes)");
  run->add_option("--db", o->db,
                  "a tuning log: template kernels use its best configs for --target / --device-key (with --optimize, "
                  "convolutions also the channel blocks of its records)");
  run->add_option("--device-key", o->device_key, "the device class whose records --db may use")->capture_default_str();
  run->add_flag("--optimize", o->optimize,
                "run the graph passes first (simplification, BatchNorm folding, constant folding, CSE, DCE)");
  run->callback([o, profile] {
    o->profile_given = profile->count() > 0;
    run_model(*o);
  });

  auto c = std::make_shared<ModelOptions>();
  CLI::App *compile = app.add_subcommand(
      "compile", "compile an ONNX model into one deployable file (kernels, graph, parameters, memory plan)");
  add_model_options(compile, *c);
  compile->add_option("-o,--output", c->output, "the artifact to write, e.g. model.kiln")->required();
  compile->add_option("--db", c->db,
                      "a tuning log: template kernels use its best configs for --target / --device-key, and "
                      "convolutions the channel blocks of its records");
  compile->add_option("--device-key", c->device_key, "the device class whose records --db may use")
      ->capture_default_str();
  compile->add_flag("--print-graph", c->print_graph, "print the graph after the passes");
  compile->callback([c] { run_compile(*c); });

  auto p = std::make_shared<ModelOptions>();
  CLI::App *inspect = app.add_subcommand(
      "inspect", "summarise an ONNX model: inputs, outputs, op counts, parameters, FLOPs, unsupported ops");
  add_model_options(inspect, *p);
  inspect->callback([p] { run_inspect(*p); });
}

}  // namespace kiln::cli
