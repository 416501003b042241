// kiln._runtime: a compiled model (model.kiln) loaded and run with deploy::GraphModule, and the
// error classes every part of the package raises. It links kiln_deploy only: running an artifact
// needs neither the compiler nor LLVM.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "contracts/error.h"
#include "deploy/graph_module.h"
#include "deploy/module.h"
#include "deploy/tensor.h"
#include "python/src/numpy_tensor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

py::list io_list(const std::vector<deploy::GraphIo> &ios) {
  py::list out;
  for (const auto &io : ios) out.append(py::make_tuple(io.name, io.shape, io.dtype.to_string()));
  return out;
}

void set_input(deploy::GraphModule &m, const py::handle &key, const py::handle &value) {
  deploy::Tensor t = tensor_from_array(value);
  if (py::isinstance<py::int_>(key)) {
    m.set_input(key.cast<int>(), t);
  } else {
    m.set_input(key.cast<std::string>(), t);
  }
}

void run(deploy::GraphModule &m) {
  py::gil_scoped_release release;
  m.run();
}

py::list outputs(const deploy::GraphModule &m) {
  py::list out;
  for (size_t i = 0; i < m.outputs().size(); ++i) out.append(array_from_tensor(m.get_output(static_cast<int>(i))));
  return out;
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_runtime, m) {
  using namespace kiln;
  using namespace kiln::python;
  m.doc() = "Compiled models run without the compiler, and Kiln's error classes.";

  static py::exception<UserError> user_error(m, "UserError", PyExc_ValueError);
  static py::exception<InternalError> internal_error(m, "InternalError", PyExc_RuntimeError);
  static py::exception<deploy::TensorError> tensor_error(m, "TensorError", user_error.ptr());
  static py::exception<deploy::KernelError> kernel_error(m, "KernelError", user_error.ptr());
  static py::exception<deploy::ModuleError> module_error(m, "ModuleError", user_error.ptr());
  static py::exception<deploy::ArtifactError> artifact_error(m, "ArtifactError", module_error.ptr());
  static py::exception<deploy::GraphInputError> input_error(m, "GraphInputError", user_error.ptr());
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const deploy::TensorError &e) {
      PyErr_SetString(tensor_error.ptr(), e.what());
    } catch (const deploy::KernelError &e) {
      PyErr_SetString(kernel_error.ptr(), e.what());
    } catch (const deploy::ArtifactError &e) {
      PyErr_SetString(artifact_error.ptr(), e.what());
    } catch (const deploy::ModuleError &e) {
      PyErr_SetString(module_error.ptr(), e.what());
    } catch (const deploy::GraphInputError &e) {
      PyErr_SetString(input_error.ptr(), e.what());
    } catch (const UserError &e) {
      PyErr_SetString(user_error.ptr(), e.what());
    } catch (const InternalError &e) {
      PyErr_SetString(internal_error.ptr(), e.what());
    }
  });

  py::class_<deploy::GraphModule>(m, "GraphModule", "A compiled model loaded for running (deploy::GraphModule).")
      .def_property_readonly(
          "inputs", [](const deploy::GraphModule &g) { return io_list(g.inputs()); },
          "(name, shape, dtype) of each input, in order.")
      .def_property_readonly(
          "outputs", [](const deploy::GraphModule &g) { return io_list(g.outputs()); },
          "(name, shape, dtype) of each output, in order.")
      .def_property_readonly("target", &deploy::GraphModule::target)
      .def_property_readonly("arena_bytes", &deploy::GraphModule::arena_bytes)
      .def_property_readonly("params_bytes", &deploy::GraphModule::params_bytes)
      .def("set_input", &set_input, py::arg("key"), py::arg("value"),
           "Copies a numpy array into an input, given by name or index. GraphInputError for a wrong shape or dtype.")
      .def("run", &run, "Runs every kernel (without the GIL).")
      .def(
          "get_output", [](const deploy::GraphModule &g, int i) { return array_from_tensor(g.get_output(i)); },
          py::arg("index"), "A copy of output `index` after run(), as a numpy array.")
      .def(
          "__call__",
          [](deploy::GraphModule &g, py::args args, py::kwargs kwargs) {
            for (size_t i = 0; i < args.size(); ++i) set_input(g, py::int_(i), args[i]);
            for (auto [k, v] : kwargs) set_input(g, k, v);
            run(g);
            return outputs(g);
          },
          "Sets the inputs (in order, or by name), runs, and returns the outputs as numpy arrays.");

  m.def(
      "load", [](const std::string &path) { return deploy::GraphModule::load(path); }, py::arg("path"),
      "Loads a compiled model (model.kiln). ArtifactError for a file that is not one.");
}
