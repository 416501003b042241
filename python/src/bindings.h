#pragma once
// What the parts of the kiln._kiln extension share: the schedule handle, the compiled module and
// the submodules' bind functions.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/build.h"
#include "compiler/ir/function.h"
#include "compiler/te/schedule.h"

namespace kiln::python {

// A schedule shared by Python's handles to it and to its stages.
using SchedulePtr = std::shared_ptr<te::Schedule>;

// A compiled module, kiln.Module: the lowered functions and their code in this process.
using PyModule = driver::BuiltFunction;

// Compiles lowered functions for a CPU target (the GIL released while LLVM works).
std::shared_ptr<PyModule> build_module(std::vector<ir::LoweredFunc> funcs, const std::string &target);

// A JSON value of Kiln's as the Python value json.loads gives, and back.
pybind11::object json_to_py(const std::string &text);
std::string py_to_json(const pybind11::handle &value);

void bind_ops(pybind11::module_ m);
void bind_db(pybind11::module_ m);
void bind_graph(pybind11::module_ m);
void bind_tune(pybind11::module_ m);

}  // namespace kiln::python
