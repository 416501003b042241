// kiln.graph: ONNX models imported into the graph IR (frontend/onnx), optimized for a target
// (driver/graph_pipeline.h), run by the reference executor (driver/graph_executor.h) and compiled
// into a deployable artifact (driver/graph_compiler.h), with the configs of a tuning log.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/graph.h"
#include "db/tuning_db.h"
#include "python/src/bindings.h"
#include "python/src/numpy_tensor.h"
#include "tuner/db_config_lookup.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// The configs of a tuning log, given as a path or an open kiln.db.TuningLog, for one device class.
struct Lookup {
  py::object log_object;                // an open log the caller passed (kept alive)
  std::unique_ptr<db::TuningDb> owned;  // a log opened here from a path
  std::unique_ptr<tuner::DbConfigLookup> lookup;

  Lookup(const py::object &log, const std::string &device) {
    if (log.is_none()) return;
    db::TuningDb *db = nullptr;
    if (py::isinstance<db::TuningDb>(log)) {
      log_object = log;
      db = &log.cast<db::TuningDb &>();
    } else {
      db::TuningDbOptions options;
      options.read_only = true;
      owned = std::make_unique<db::TuningDb>(db::TuningDb::open(py::str(log).cast<std::string>(), options));
      db = owned.get();
    }
    lookup = std::make_unique<tuner::DbConfigLookup>(*db, device);
  }
  const ops::ConfigLookup *get() const { return lookup.get(); }
};

struct PyExecutor {
  std::unique_ptr<Lookup> configs;
  std::unique_ptr<driver::GraphExecutor> executor;
};

py::list io_list(const graph::Graph &g, const std::vector<graph::ValueId> &ids) {
  py::list out;
  for (auto id : ids) {
    const graph::Value &v = g.value(id);
    out.append(py::make_tuple(v.name, v.type.shape, graph::dtype_name(v.type.dtype)));
  }
  return out;
}

// Positional inputs in the graph's order, or inputs by name.
std::vector<deploy::Tensor> run_executor(const driver::GraphExecutor &ex, const py::args &args,
                                         const py::kwargs &kwargs) {
  std::vector<deploy::Tensor> outs;
  if (kwargs.size() > 0) {
    if (args.size() > 0) throw UserError("give the inputs in order or by name, not both");
    std::map<std::string, deploy::Tensor> named;
    for (auto [k, v] : kwargs) named[k.cast<std::string>()] = tensor_from_array(v);
    py::gil_scoped_release release;
    outs = ex.run(named);
  } else {
    std::vector<deploy::Tensor> inputs;
    for (auto a : args) inputs.push_back(tensor_from_array(a));
    py::gil_scoped_release release;
    outs = ex.run(inputs);
  }
  return outs;
}

}  // namespace

void bind_graph(py::module_ m) {
  py::class_<graph::Graph>(m, "Graph", "A model in Kiln's graph IR.")
      .def_property_readonly(
          "inputs", [](const graph::Graph &g) { return io_list(g, g.inputs()); },
          "(name, shape, dtype) of each input, in order.")
      .def_property_readonly(
          "outputs", [](const graph::Graph &g) { return io_list(g, g.outputs()); },
          "(name, shape, dtype) of each output, in order.")
      .def_property_readonly(
          "ops",
          [](const graph::Graph &g) {
            std::vector<std::string> ops;
            for (const auto &n : g.nodes()) ops.push_back(n.op);
            return ops;
          },
          "The op type of each node, in order.")
      .def("__len__", [](const graph::Graph &g) { return g.nodes().size(); })
      .def(
          "optimize",
          [](const graph::Graph &g, const std::string &target, py::object log, const std::string &device) {
            Lookup configs(log, device);
            py::gil_scoped_release release;
            return driver::optimize_graph_for_target(g, target, configs.get());
          },
          py::arg("target") = "llvm -mcpu=native", py::arg("log") = py::none(), py::arg("device") = "local-cpu",
          "The graph after every pass of the pipeline for `target` (what kiln compile runs); with a tuning log (a "
          "path or a kiln.db.TuningLog) for `device`, the convolutions' blocks are those of their tuned configs.")
      .def("__str__", [](const graph::Graph &g) { return graph::print(g); });

  m.def(
      "load_onnx",
      [](const std::string &path, std::map<std::string, std::vector<int64_t>> input_shapes, const std::string &target) {
        frontend::onnx::ImportOptions options;
        options.input_shapes = std::move(input_shapes);
        options.target = target;
        py::gil_scoped_release release;
        return frontend::onnx::import_model(path, options);
      },
      py::arg("path"), py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
      py::arg("target") = "llvm -mcpu=native",
      "Imports an ONNX model; input_shapes fixes dynamic input dimensions ({name: shape}).");

  py::class_<PyExecutor>(m, "Executor",
                         "The reference executor: every node compiled by Kiln's compiler and run in order.")
      .def(py::init([](const graph::Graph &g, const std::string &target, py::object log, const std::string &device) {
             auto ex = std::make_unique<PyExecutor>();
             ex->configs = std::make_unique<Lookup>(log, device);
             driver::ExecutorOptions options;
             options.target = target;
             options.configs = ex->configs->get();
             py::gil_scoped_release release;
             ex->executor = std::make_unique<driver::GraphExecutor>(g, options);
             return ex;
           }),
           py::arg("graph"), py::arg("target") = "llvm -mcpu=native", py::arg("log") = py::none(),
           py::arg("device") = "local-cpu")
      .def(
          "run",
          [](const PyExecutor &ex, py::args args, py::kwargs kwargs) {
            py::list out;
            for (auto &t : run_executor(*ex.executor, args, kwargs)) out.append(array_from_tensor(std::move(t)));
            return out;
          },
          "Runs the graph on numpy arrays (in the graph's input order, or by name); returns the outputs.")
      .def_property_readonly("tuned_kernels", [](const PyExecutor &ex) { return ex.executor->stats().tuned_kernels; })
      .def_property_readonly("template_kernels",
                             [](const PyExecutor &ex) { return ex.executor->stats().template_kernels; });

  m.def(
      "compile",
      [](const graph::Graph &g, const std::string &path, const std::string &target, py::object log,
         const std::string &device) {
        Lookup configs(log, device);
        driver::GraphCompileOptions options;
        options.kernels.target = target;
        options.kernels.configs = configs.get();
        driver::GraphCompileReport r;
        {
          py::gil_scoped_release release;
          r = driver::compile_graph(g, path, options);
        }
        py::dict d;
        d["nodes"] = r.nodes;
        d["steps"] = r.steps;
        d["kernels"] = r.kernels;
        d["template_kernels"] = r.template_kernels;
        d["tuned_kernels"] = r.tuned_kernels;
        d["arena_bytes"] = r.arena_bytes;
        d["params_bytes"] = r.params_bytes;
        d["file_bytes"] = r.file_bytes;
        d["compile_s"] = r.compile_s;
        return d;
      },
      py::arg("graph"), py::arg("path"), py::arg("target") = "llvm -mcpu=native", py::arg("log") = py::none(),
      py::arg("device") = "local-cpu",
      "Compiles the graph into an artifact at `path` (kiln.runtime.load runs it), with the best configs of a "
      "tuning log (a path or a kiln.db.TuningLog) for `device`; returns the compile report.");
}

}  // namespace kiln::python
