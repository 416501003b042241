// The kiln._kiln extension: tensor expressions, schedules, lowering and building for the CPU, the
// compiler's error classes, and the module that gathers the submodules bound in ops_module.cpp,
// db_module.cpp, graph_module.cpp and tune_module.cpp.
// Each function binds one C++ entry point; nothing here decides what the compiler does.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/graph.h"
#include "compiler/ir/error.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/registry.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "contracts/error.h"
#include "db/error.h"
#include "deploy/graph_module.h"
#include "deploy/module.h"
#include "deploy/tensor.h"
#include "python/src/bindings.h"
#include "python/src/numpy_tensor.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Var;

// A Python number, expression, variable or iteration variable as an expression.
Expr to_expr(const py::handle &h) {
  if (py::isinstance<Expr>(h)) return h.cast<Expr>();
  if (py::isinstance<IterVar>(h)) return Expr(h.cast<IterVar>());
  if (py::isinstance<py::bool_>(h)) return h.cast<bool>() ? ir::const_true() : ir::const_false();
  if (py::isinstance<py::int_>(h)) {
    auto v = h.cast<int64_t>();
    if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max())
      return Expr(static_cast<int>(v));
    return Expr(v);
  }
  if (py::isinstance<py::float_>(h)) return Expr(h.cast<double>());
  throw py::type_error("expected an expression or a number, got " + std::string(py::str(h.get_type())));
}

std::vector<Expr> to_exprs(const py::handle &h) {
  std::vector<Expr> out;
  if (py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) {
    for (auto item : h) out.push_back(to_expr(item));
  } else {
    out.push_back(to_expr(h));
  }
  return out;
}

std::vector<IterVar> to_iter_vars(const py::handle &h) {
  std::vector<IterVar> out;
  if (py::isinstance<IterVar>(h)) {
    out.push_back(h.cast<IterVar>());
  } else {
    for (auto item : h) out.push_back(item.cast<IterVar>());
  }
  return out;
}

template <class T>
std::string str_of(const T &v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The operators of Python on expressions, for a class whose objects read as expressions.
template <class Class>
void def_operators(Class &c) {
  using ir::operator+;
  c.def("__add__", [](py::object a, py::object b) { return to_expr(a) + to_expr(b); })
      .def("__radd__", [](py::object a, py::object b) { return to_expr(b) + to_expr(a); })
      .def("__sub__", [](py::object a, py::object b) { return to_expr(a) - to_expr(b); })
      .def("__rsub__", [](py::object a, py::object b) { return to_expr(b) - to_expr(a); })
      .def("__mul__", [](py::object a, py::object b) { return to_expr(a) * to_expr(b); })
      .def("__rmul__", [](py::object a, py::object b) { return to_expr(b) * to_expr(a); })
      .def("__truediv__", [](py::object a, py::object b) { return to_expr(a) / to_expr(b); })
      .def("__rtruediv__", [](py::object a, py::object b) { return to_expr(b) / to_expr(a); })
      .def("__floordiv__", [](py::object a, py::object b) { return ir::floordiv(to_expr(a), to_expr(b)); })
      .def("__rfloordiv__", [](py::object a, py::object b) { return ir::floordiv(to_expr(b), to_expr(a)); })
      .def("__mod__", [](py::object a, py::object b) { return ir::floormod(to_expr(a), to_expr(b)); })
      .def("__rmod__", [](py::object a, py::object b) { return ir::floormod(to_expr(b), to_expr(a)); })
      .def("__neg__", [](py::object a) { return -to_expr(a); })
      .def("__lt__", [](py::object a, py::object b) { return to_expr(a) < to_expr(b); })
      .def("__le__", [](py::object a, py::object b) { return to_expr(a) <= to_expr(b); })
      .def("__gt__", [](py::object a, py::object b) { return to_expr(a) > to_expr(b); })
      .def("__ge__", [](py::object a, py::object b) { return to_expr(a) >= to_expr(b); })
      .def(
          "equal", [](py::object a, py::object b) { return to_expr(a) == to_expr(b); },
          "The expression a == b (Python's == compares identity).")
      .def(
          "astype",
          [](py::object a, const std::string &dtype) { return ir::cast(ir::DataType::parse(dtype), to_expr(a)); },
          "The expression converted to `dtype`.")
      .def_property_readonly("dtype", [](py::object a) { return to_expr(a).type().to_string(); })
      .def("__str__", [](py::object a) { return ir::to_string(to_expr(a)); })
      .def("__repr__", [](py::object a) { return ir::to_string(to_expr(a)); });
}

struct PyStage {
  SchedulePtr sch;
  te::Stage stage;
};

struct PyOp {
  te::Operation op;
};

te::Tensor tensor_of(const py::handle &h) { return h.cast<te::Tensor>(); }

std::vector<te::Tensor> to_tensors(const py::handle &h) {
  std::vector<te::Tensor> out;
  for (auto item : h) out.push_back(tensor_of(item));
  return out;
}

std::vector<te::Operation> to_ops(const py::handle &h) {
  std::vector<te::Operation> out;
  auto one = [&](const py::handle &x) {
    if (py::isinstance<PyOp>(x)) {
      out.push_back(x.cast<PyOp>().op);
    } else {
      out.push_back(x.cast<te::Tensor>().op());
    }
  };
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    for (auto item : h) one(item);
  } else {
    one(h);
  }
  return out;
}

// Calls `name` on numpy arrays through BuiltFunction::call, which runs the entry point's checks:
// each C-contiguous, aligned array is passed in place; any other is copied into an aligned tensor
// and, if writeable, copied back after the call.
void call_packed(const PyModule &m, const std::string &name, const py::args &args) {
  std::vector<py::array> arrays;
  std::vector<deploy::Tensor> staged(args.size());
  std::vector<std::vector<int64_t>> shapes(args.size());
  std::vector<KilnArg> packed(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    py::array a = py::array::ensure(args[i]);
    if (!a) throw py::type_error("argument " + std::to_string(i) + " is not an array");
    arrays.push_back(a);
    deploy::DType dt = dtype_of_array(a);
    shapes[i].assign(a.shape(), a.shape() + a.ndim());
    bool contiguous = (a.flags() & py::array::c_style) != 0;
    void *data = const_cast<void *>(a.data());
    if (!contiguous || reinterpret_cast<uintptr_t>(data) % deploy::kTensorAlignment != 0) {
      staged[i] = deploy::Tensor::empty(shapes[i], dt);
      py::array dst(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()), staged[i].data(), py::none());
      py::module_::import("numpy").attr("copyto")(dst, a);
      data = staged[i].data();
    }
    packed[i] = KilnArg{data, static_cast<int32_t>(a.ndim()), shapes[i].data(), nullptr, dt.code, dt.bits, dt.lanes};
  }
  {
    py::gil_scoped_release release;
    m.call(name, packed);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!staged[i].defined() || !arrays[i].writeable()) continue;
    py::array src(arrays[i].dtype(), std::vector<py::ssize_t>(shapes[i].begin(), shapes[i].end()), staged[i].data(),
                  py::none());
    py::module_::import("numpy").attr("copyto")(arrays[i], src);
  }
}

// One buffer of a tensor intrinsic: the region of a real buffer it works on, addressed from
// `offset` (in elements) with the buffer's strides (te::TensorIntrinBuffers).
struct PyIntrinBuffer {
  ir::Buffer buf;
  Expr offset;

  Expr address(const py::handle &indices) const {
    std::vector<Expr> idx = to_exprs(indices);
    if (idx.size() != buf.shape.size()) {
      throw ExprError("buffer " + buf.name + " has " + std::to_string(buf.shape.size()) + " dimensions, indexed with " +
                      std::to_string(idx.size()));
    }
    return offset + buf.offset_of(idx);
  }
};

std::vector<PyIntrinBuffer> intrin_buffers(const std::vector<ir::Buffer> &bufs, const std::vector<Expr> &offsets) {
  std::vector<PyIntrinBuffer> out;
  for (size_t i = 0; i < bufs.size(); ++i) out.push_back(PyIntrinBuffer{bufs[i], offsets.at(i)});
  return out;
}

// A Python function held by C++ (the schedule's intrinsics): the last reference is dropped with the
// GIL, whichever thread drops it.
std::shared_ptr<py::function> hold(py::function f) {
  return std::shared_ptr<py::function>(new py::function(std::move(f)), [](py::function *p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

ir::Stmt to_stmt(const py::handle &h, const std::string &what) {
  if (!py::isinstance<ir::Stmt>(h)) {
    throw py::type_error(what + " must be a statement, got " + std::string(py::str(h.get_type())));
  }
  return h.cast<ir::Stmt>();
}

void bind_tensor_intrin(py::module_ &m) {
  py::class_<PyIntrinBuffer>(m, "Buffer",
                             "A buffer a tensor intrinsic's body works on: a region of a real tensor, read with "
                             "vload and written with vstore.")
      .def_property_readonly("name", [](const PyIntrinBuffer &b) { return b.buf.name; })
      .def_property_readonly("dtype", [](const PyIntrinBuffer &b) { return b.buf.dtype.to_string(); })
      .def_property_readonly("shape", [](const PyIntrinBuffer &b) { return b.buf.shape; })
      .def_property_readonly(
          "strides", [](const PyIntrinBuffer &b) { return b.buf.strides; },
          "The stride of each dimension in elements (variables bound to the real buffer's).")
      .def_property_readonly(
          "elem_offset", [](const PyIntrinBuffer &b) { return b.offset; },
          "The offset of the region's first element in the real buffer, in elements.")
      .def_property_readonly(
          "data", [](const PyIntrinBuffer &b) { return b.buf.data; },
          "The real buffer's data pointer (a handle), for call_extern.")
      .def(
          "vload",
          [](const PyIntrinBuffer &b, py::object indices) {
            return ir::LoadNode::make(b.buf.dtype, b.buf.data, b.address(indices));
          },
          py::arg("indices"), "The element at `indices` (one per dimension) of the region.")
      .def(
          "vstore",
          [](const PyIntrinBuffer &b, py::object indices, py::object value) {
            Expr v = py::isinstance<Expr>(value) || py::isinstance<IterVar>(value)
                         ? to_expr(value)
                         : ir::cast(b.buf.dtype, to_expr(value));
            if (v.type() != b.buf.dtype) {
              throw ExprError("buffer " + b.buf.name + " of " + b.buf.dtype.to_string() + ": cannot store a " +
                              v.type().to_string());
            }
            return ir::StoreNode::make(b.buf.data, v, b.address(indices));
          },
          py::arg("indices"), py::arg("value"), "The statement storing `value` at `indices` of the region.")
      .def("__repr__",
           [](const PyIntrinBuffer &b) { return "Buffer(" + b.buf.name + ", " + b.buf.dtype.to_string() + ")"; });

  m.def(
      "for_range",
      [](py::object extent, py::function fbody, const std::string &name, py::object begin) {
        Var v(name, ir::Int(32));
        ir::Stmt body = to_stmt(fbody(v), "the body fbody returns");
        return ir::ForNode::make(v, to_expr(begin), to_expr(extent), ir::ForKind::Serial, body);
      },
      py::arg("extent"), py::arg("fbody"), py::arg("name") = "i", py::arg("begin") = 0,
      "A serial loop over [begin, begin + extent): fbody receives the loop variable and returns the body.");
  m.def(
      "seq",
      [](py::args stmts) {
        std::vector<ir::Stmt> out;
        for (auto s : stmts) out.push_back(to_stmt(s, "each argument of seq"));
        if (out.empty()) return ir::make_nop();
        if (out.size() == 1) return out[0];
        return ir::BlockNode::make(out);
      },
      "The statements run one after the other.");
  m.def(
      "evaluate", [](py::object e) { return ir::EvaluateNode::make(to_expr(e)); }, py::arg("value"),
      "A statement evaluating an expression (a call) for its effect.");
  m.def(
      "decl_tensor_intrin",
      [](py::object op, py::function fcompute, const std::string &name) {
        te::Tensor pattern = py::isinstance<PyOp>(op) ? op.cast<PyOp>().op->output(0) : op.cast<te::Tensor>();
        auto f = hold(std::move(fcompute));
        // fcompute(ins, outs) gives the body, or (body, reset, update); phase 0, 1, 2 of those.
        auto phase = [f, name](int which) {
          return [f, name, which](const te::TensorIntrinBuffers &bf) {
            py::gil_scoped_acquire gil;
            py::object r =
                (*f)(intrin_buffers(bf.inputs, bf.input_offsets), intrin_buffers(bf.outputs, bf.output_offsets));
            if (py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) {
              if (py::len(r) != 3) {
                throw py::value_error("tensor intrinsic " + name +
                                      ": fcompute returns a statement or (body, reset, update)");
              }
              return to_stmt(r[py::int_(which)], "what fcompute returns");
            }
            if (which != 0) {
              throw ScheduleError("tensor intrinsic " + name +
                                  ": reduction loops outside it need fcompute to return (body, reset, update)");
            }
            return to_stmt(r, "what fcompute returns");
          };
        };
        return te::decl_tensor_intrin(name, pattern, phase(0), phase(1), phase(2));
      },
      py::arg("op"), py::arg("fcompute"), py::arg("name") = "tensor_intrin",
      R"doc(A tensor intrinsic for Stage.tensorize: the computation `op` (a compute on placeholders)
and the code that performs it.

fcompute(ins, outs) receives one Buffer per placeholder `op` reads and one per output, and
returns the statement that computes the outputs (built with Buffer.vload/vstore, te.for_range,
te.seq), or (body, reset, update) as in TVM: the whole computation, the initialisation of the
outputs, and one accumulation step, used when reduction loops stay outside the tensorized loop.
fcompute is called while the schedule is lowered.)doc");
}
}  // namespace

void bind_errors(py::module_ &m) {
  // The classes kiln._runtime defines (it has no compiler), and the compiler's below them.
  py::module_ rt = py::module_::import("kiln._runtime");
  static PyObject *user_error = py::object(rt.attr("UserError")).release().ptr();
  static PyObject *internal_error = py::object(rt.attr("InternalError")).release().ptr();
  static PyObject *tensor_error = py::object(rt.attr("TensorError")).release().ptr();
  static PyObject *kernel_error = py::object(rt.attr("KernelError")).release().ptr();
  static PyObject *module_error = py::object(rt.attr("ModuleError")).release().ptr();
  static PyObject *artifact_error = py::object(rt.attr("ArtifactError")).release().ptr();
  static PyObject *input_error = py::object(rt.attr("GraphInputError")).release().ptr();
  for (const char *name : {"UserError", "InternalError", "TensorError", "KernelError", "ModuleError", "ArtifactError",
                           "GraphInputError"}) {
    m.attr(name) = rt.attr(name);
  }
  static py::exception<ScheduleError> schedule_error(m, "ScheduleError", user_error);
  static py::exception<ExprError> expr_error(m, "ExprError", user_error);
  static py::exception<RuntimeError> runtime_error(m, "KernelRuntimeError", user_error);
  static py::exception<ops::OpError> op_error(m, "OpError", user_error);
  static py::exception<autotune::ConfigError> config_error(m, "ConfigError", user_error);
  static py::exception<db::TuningDbError> db_error(m, "TuningDbError", user_error);
  static py::exception<graph::GraphError> graph_error(m, "GraphError", user_error);
  static py::exception<frontend::onnx::ImportError> import_error(m, "ModelImportError", user_error);
  static py::exception<driver::ExecutionError> execution_error(m, "ExecutionError", user_error);
  static py::exception<tuner::TuneError> tune_error(m, "TuneError", user_error);
  static py::exception<tuner::MeasureError> measure_error(m, "MeasureError", user_error);
  // The most derived class that matches names the Python exception.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ScheduleError &e) {
      PyErr_SetString(schedule_error.ptr(), e.what());
    } catch (const ExprError &e) {
      PyErr_SetString(expr_error.ptr(), e.what());
    } catch (const RuntimeError &e) {
      PyErr_SetString(runtime_error.ptr(), e.what());
    } catch (const deploy::TensorError &e) {
      PyErr_SetString(tensor_error, e.what());
    } catch (const deploy::KernelError &e) {
      PyErr_SetString(kernel_error, e.what());
    } catch (const deploy::ArtifactError &e) {
      PyErr_SetString(artifact_error, e.what());
    } catch (const deploy::ModuleError &e) {
      PyErr_SetString(module_error, e.what());
    } catch (const deploy::GraphInputError &e) {
      PyErr_SetString(input_error, e.what());
    } catch (const ops::OpError &e) {
      PyErr_SetString(op_error.ptr(), e.what());
    } catch (const autotune::ConfigError &e) {
      PyErr_SetString(config_error.ptr(), e.what());
    } catch (const db::TuningDbError &e) {
      PyErr_SetString(db_error.ptr(), e.what());
    } catch (const graph::GraphError &e) {
      PyErr_SetString(graph_error.ptr(), e.what());
    } catch (const frontend::onnx::ImportError &e) {
      PyErr_SetString(import_error.ptr(), e.what());
    } catch (const driver::ExecutionError &e) {
      PyErr_SetString(execution_error.ptr(), e.what());
    } catch (const tuner::TuneError &e) {
      PyErr_SetString(tune_error.ptr(), e.what());
    } catch (const tuner::MeasureError &e) {
      PyErr_SetString(measure_error.ptr(), e.what());
    } catch (const UserError &e) {
      PyErr_SetString(user_error, e.what());
    } catch (const InternalError &e) {
      PyErr_SetString(internal_error, e.what());
    }
  });
}

void bind_te(py::module_ &m) {
  py::class_<Expr> expr(m, "Expr", "An expression of the tensor language.");
  def_operators(expr);
  expr.def("__hash__", [](const Expr &e) { return std::hash<const void *>()(e.get()); })
      .def_property_readonly(
          "value",
          [](const Expr &e) -> py::object {
            if (auto v = ir::as_const_int(e)) return py::int_(*v);
            if (auto v = ir::as_const_float(e)) return py::float_(*v);
            return py::none();
          },
          "The value of a constant, None otherwise.");

  py::class_<Var, Expr>(m, "Var", "A symbolic size or index variable.").def_property_readonly("name", &Var::name);

  py::class_<IterVar> iv(m, "IterVar", "An iteration variable: a loop of a stage, with its range.");
  def_operators(iv);
  iv.def_property_readonly("var", &IterVar::var)
      .def_property_readonly(
          "dom",
          [](const IterVar &v) -> py::object {
            if (!v.dom().defined()) return py::none();
            return py::make_tuple(v.dom().min, v.dom().extent);
          },
          "(min, extent), or None before bound inference.")
      .def_property_readonly("thread_tag", [](const IterVar &v) { return v->thread_tag; })
      .def("__hash__", [](const IterVar &v) { return std::hash<const void *>()(v.get()); });

  py::class_<PyOp>(m, "Operation", "The producer of a tensor: a placeholder or a compute.")
      .def_property_readonly("name", [](const PyOp &o) { return o.op->name; })
      .def_property_readonly("tag", [](const PyOp &o) { return o.op->tag; })
      .def_property_readonly(
          "axis",
          [](const PyOp &o) {
            auto c = std::dynamic_pointer_cast<const te::ComputeOpNode>(o.op);
            return c ? c->axis : std::vector<IterVar>{};
          },
          "The data-parallel axes, one per output dimension.")
      .def_property_readonly(
          "reduce_axis",
          [](const PyOp &o) {
            auto c = std::dynamic_pointer_cast<const te::ComputeOpNode>(o.op);
            return c ? c->reduce_axis : std::vector<IterVar>{};
          },
          "The reduction axes.")
      .def_property_readonly("input_tensors", [](const PyOp &o) { return o.op->input_tensors(); })
      .def_property_readonly("num_outputs", [](const PyOp &o) { return o.op->num_outputs(); })
      .def("output", [](const PyOp &o, int i) { return o.op->output(i); })
      .def("__eq__", [](const PyOp &a, const PyOp &b) { return a.op == b.op; })
      .def("__hash__", [](const PyOp &o) { return std::hash<const void *>()(o.op.get()); })
      .def("__repr__", [](const PyOp &o) { return "Operation(" + o.op->name + ")"; });

  py::class_<te::Tensor>(m, "Tensor", "A tensor: an output of an operation. Index it to read an element: A[i, j].")
      .def_property_readonly("op", [](const te::Tensor &t) { return PyOp{t.op()}; })
      .def_property_readonly("name", &te::Tensor::name)
      .def_property_readonly("shape", &te::Tensor::shape)
      .def_property_readonly("ndim", &te::Tensor::ndim)
      .def_property_readonly("value_index", &te::Tensor::value_index)
      .def_property_readonly("dtype", [](const te::Tensor &t) { return t.dtype().to_string(); })
      .def("__getitem__", [](const te::Tensor &t, py::object idx) { return t(to_exprs(idx)); })
      .def("__eq__", [](const te::Tensor &a, const te::Tensor &b) { return a == b; })
      .def("__hash__", [](const te::Tensor &t) { return std::hash<const void *>()(t.op().get()) + t.value_index(); })
      .def("__repr__", [](const te::Tensor &t) { return "Tensor(" + t.name() + ", " + t.dtype().to_string() + ")"; });

  m.def(
      "var",
      [](const std::string &name, const std::string &dtype) { return te::var(name, ir::DataType::parse(dtype)); },
      py::arg("name") = "tindex", py::arg("dtype") = "int32", "A symbolic variable (a size or an index).");
  m.def(
      "const",
      [](py::object v, const std::string &dtype) {
        auto t = ir::DataType::parse(dtype);
        if (py::isinstance<py::float_>(v)) return ir::make_const(t, v.cast<double>());
        return ir::make_const(t, v.cast<int64_t>());
      },
      py::arg("value"), py::arg("dtype") = "int32", "A constant of `dtype`.");
  m.def(
      "placeholder",
      [](py::object shape, const std::string &dtype, const std::string &name) {
        return te::placeholder(to_exprs(shape), ir::DataType::parse(dtype), name);
      },
      py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = "placeholder",
      "An input tensor of `shape` (integers or variables) and `dtype`.");
  m.def(
      "compute",
      [](py::object shape, py::function fcompute, const std::string &name, const std::string &tag) {
        te::FComputeMulti f = [fcompute](const std::vector<Var> &vars) {
          py::tuple args(vars.size());
          for (size_t i = 0; i < vars.size(); ++i) args[i] = py::cast(vars[i]);
          py::object r = fcompute(*args);
          return to_exprs(r);
        };
        auto outs = te::compute_multi(to_exprs(shape), f, name, tag);
        if (outs.size() == 1) return py::cast(outs[0]);
        return py::cast(outs);
      },
      py::arg("shape"), py::arg("fcompute"), py::arg("name") = "compute", py::arg("tag") = "",
      R"doc(A tensor of `shape` whose element at index (i, j, ...) is fcompute(i, j, ...).

fcompute receives one index variable per dimension and returns an expression
(or a tuple of expressions, for several outputs computed in one loop nest).
Reductions use te.sum / te.max / te.min over axes made by te.reduce_axis.

    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
)doc");
  m.def(
      "reduce_axis",
      [](py::object dom, const std::string &name) {
        auto d = to_exprs(dom);
        if (d.size() == 1) return te::reduce_axis(d[0], name);
        if (d.size() == 2) return te::reduce_axis(ir::Range(d[0], d[1] - d[0]), name);
        throw py::value_error("reduce_axis takes an extent or a (begin, end) pair");
      },
      py::arg("dom"), py::arg("name") = "k", "A reduction axis over [0, dom) or [begin, end).");
  m.def(
      "thread_axis",
      [](py::object dom, const std::string &tag, const std::string &name) {
        std::string thread_tag = tag;
        if (py::isinstance<py::str>(dom)) {  // thread_axis("threadIdx.x")
          thread_tag = dom.cast<std::string>();
          dom = py::none();
        }
        std::string var_name = name.empty() ? thread_tag : name;
        ir::Range range;
        if (!dom.is_none()) {
          auto d = to_exprs(dom);
          range = d.size() == 1 ? ir::Range(0, d[0]) : ir::Range(d[0], d[1] - d[0]);
        }
        return IterVar(range, Var(var_name), ir::IterVarType::ThreadIndex, thread_tag);
      },
      py::arg("dom") = py::none(), py::arg("tag") = "", py::arg("name") = "",
      "A thread index (\"blockIdx.x\", \"threadIdx.x\", \"vthread\") to bind a loop to.");
  auto reducer = [&m](const char *name, auto fn, const char *doc) {
    m.def(
        name,
        [fn](py::object source, py::object axis, py::object where) {
          return fn(to_expr(source), to_iter_vars(axis), where.is_none() ? Expr() : to_expr(where));
        },
        py::arg("expr"), py::arg("axis"), py::arg("where") = py::none(), doc);
  };
  reducer(
      "sum", [](Expr s, std::vector<IterVar> a, Expr c) { return te::sum(s, a, c); },
      "The sum of expr over the reduce axes.");
  reducer(
      "prod", [](Expr s, std::vector<IterVar> a, Expr c) { return te::prod(s, a, c); },
      "The product of expr over the reduce axes.");
  // te.max / te.min: a reduction when given axis, the elementwise maximum of two expressions otherwise.
  m.def(
      "max",
      [](py::object a, py::object b, py::object where) -> Expr {
        if (py::isinstance<IterVar>(b) || py::isinstance<py::list>(b))
          return te::max(to_expr(a), to_iter_vars(b), where.is_none() ? Expr() : to_expr(where));
        return ir::max(to_expr(a), to_expr(b));
      },
      py::arg("expr"), py::arg("axis"), py::arg("where") = py::none(),
      "max(a, b): the larger of two expressions; max(expr, axis=k): the maximum over reduce axes.");
  m.def(
      "min",
      [](py::object a, py::object b, py::object where) -> Expr {
        if (py::isinstance<IterVar>(b) || py::isinstance<py::list>(b))
          return te::min(to_expr(a), to_iter_vars(b), where.is_none() ? Expr() : to_expr(where));
        return ir::min(to_expr(a), to_expr(b));
      },
      py::arg("expr"), py::arg("axis"), py::arg("where") = py::none(),
      "min(a, b): the smaller of two expressions; min(expr, axis=k): the minimum over reduce axes.");
  m.def(
      "if_then_else",
      [](py::object c, py::object t, py::object f) { return ir::if_then_else(to_expr(c), to_expr(t), to_expr(f)); },
      py::arg("cond"), py::arg("t"), py::arg("f"),
      "t where cond holds, f elsewhere (only the chosen side is evaluated).");
  m.def(
      "select", [](py::object c, py::object t, py::object f) { return ir::select(to_expr(c), to_expr(t), to_expr(f)); },
      py::arg("cond"), py::arg("t"), py::arg("f"), "t where cond holds, f elsewhere (both sides evaluated).");
  m.def(
      "all",
      [](py::args args) {
        Expr r = ir::const_true();
        for (auto a : args) r = r && to_expr(a);
        return r;
      },
      "The conjunction of conditions.");
  m.def(
      "any",
      [](py::args args) {
        Expr r = ir::const_false();
        for (auto a : args) r = r || to_expr(a);
        return r;
      },
      "The disjunction of conditions.");
#define KILN_UNARY(fn) \
  m.def(               \
      #fn, [](py::object x) { return ir::fn(to_expr(x)); }, py::arg("x"), "The math intrinsic " #fn ".")
  KILN_UNARY(exp);
  KILN_UNARY(log);
  KILN_UNARY(sqrt);
  KILN_UNARY(rsqrt);
  KILN_UNARY(tanh);
  KILN_UNARY(sigmoid);
  KILN_UNARY(erf);
  KILN_UNARY(fabs);
  KILN_UNARY(abs);
  KILN_UNARY(floor);
  KILN_UNARY(ceil);
  KILN_UNARY(round);
  KILN_UNARY(sin);
  KILN_UNARY(cos);
#undef KILN_UNARY
  m.def(
      "power", [](py::object x, py::object y) { return ir::pow(to_expr(x), to_expr(y)); }, "x to the power y.");
  m.def(
      "cast", [](py::object x, const std::string &dtype) { return ir::cast(ir::DataType::parse(dtype), to_expr(x)); },
      py::arg("x"), py::arg("dtype"), "x converted to dtype.");
  m.def(
      "floordiv", [](py::object a, py::object b) { return ir::floordiv(to_expr(a), to_expr(b)); },
      "Division rounding down.");
  m.def(
      "floormod", [](py::object a, py::object b) { return ir::floormod(to_expr(a), to_expr(b)); },
      "The remainder of floordiv.");
  m.def(
      "truncdiv", [](py::object a, py::object b) { return ir::truncdiv(to_expr(a), to_expr(b)); },
      "Division rounding toward zero.");
  m.def(
      "truncmod", [](py::object a, py::object b) { return ir::truncmod(to_expr(a), to_expr(b)); },
      "The remainder of truncdiv.");

  // ---- schedules
  py::class_<PyStage>(m, "Stage", "The schedule of one operation; its methods are the schedule primitives.")
      .def_property_readonly("op", [](const PyStage &s) { return PyOp{s.stage->op}; })
      .def_property_readonly("origin_op", [](const PyStage &s) { return PyOp{s.stage->origin_op}; })
      .def_property_readonly("leaf_iter_vars", [](const PyStage &s) { return s.stage->leaf_iter_vars; })
      .def_property_readonly("all_iter_vars", [](const PyStage &s) { return s.stage->all_iter_vars; })
      .def_property_readonly("scope", [](const PyStage &s) { return s.stage->scope; })
      .def(
          "split",
          [](PyStage &s, const IterVar &parent, py::object factor, py::object nparts) {
            IterVar outer, inner;
            if (!factor.is_none() && !nparts.is_none()) throw py::value_error("split takes factor or nparts, not both");
            if (!factor.is_none()) {
              s.stage.split(parent, to_expr(factor), &outer, &inner);
            } else if (!nparts.is_none()) {
              s.stage.split_nparts(parent, to_expr(nparts), &outer, &inner);
            } else {
              throw py::value_error("split needs factor or nparts");
            }
            return py::make_tuple(outer, inner);
          },
          py::arg("parent"), py::arg("factor") = py::none(), py::arg("nparts") = py::none(),
          "Splits a loop into (outer, inner): inner of extent factor, or outer of extent nparts.")
      .def(
          "tile",
          [](PyStage &s, const IterVar &x, const IterVar &y, py::object xf, py::object yf) {
            IterVar xo, yo, xi, yi;
            s.stage.tile(x, y, to_expr(xf), to_expr(yf), &xo, &yo, &xi, &yi);
            return py::make_tuple(xo, yo, xi, yi);
          },
          py::arg("x_parent"), py::arg("y_parent"), py::arg("x_factor"), py::arg("y_factor"),
          "Tiles two loops: returns (x_outer, y_outer, x_inner, y_inner) in that loop order.")
      .def(
          "fuse",
          [](PyStage &s, py::args axes) {
            IterVar fused;
            s.stage.fuse(to_iter_vars(axes), &fused);
            return fused;
          },
          "Fuses adjacent loops, outermost first, into one.")
      .def(
          "reorder", [](PyStage &s, py::args axes) { s.stage.reorder(to_iter_vars(axes)); },
          "Puts the loops in this order.")
      .def(
          "compute_at",
          [](PyStage &s, const PyStage &parent, const IterVar &scope) { s.stage.compute_at(parent.stage, scope); },
          py::arg("parent"), py::arg("scope"), "Computes this stage inside loop `scope` of `parent`.")
      .def(
          "compute_inline", [](PyStage &s) { s.stage.compute_inline(); },
          "Inlines this stage's expression into its readers.")
      .def(
          "compute_root", [](PyStage &s) { s.stage.compute_root(); },
          "Computes this stage at the root, before its readers.")
      .def(
          "unroll", [](PyStage &s, const IterVar &v) { s.stage.unroll(v); }, "Unrolls a loop.")
      .def(
          "vectorize", [](PyStage &s, const IterVar &v) { s.stage.vectorize(v); }, "Vectorizes a loop.")
      .def(
          "parallel", [](PyStage &s, const IterVar &v) { s.stage.parallel(v); },
          "Runs a loop's iterations on several threads.")
      .def(
          "bind", [](PyStage &s, const IterVar &v, const IterVar &thread) { s.stage.bind(v, thread->thread_tag); },
          py::arg("ivar"), py::arg("thread_ivar"), "Binds a loop to a thread index made by te.thread_axis.")
      .def(
          "pragma",
          [](PyStage &s, const IterVar &v, const std::string &key, py::object value) {
            s.stage.pragma(v, key, to_expr(value));
          },
          py::arg("var"), py::arg("pragma_type"), py::arg("pragma_value") = 1, "Annotates a loop with a pragma.")
      .def(
          "storage_align",
          [](PyStage &s, const IterVar &axis, int factor, int offset) { s.stage.storage_align(axis, factor, offset); },
          py::arg("axis"), py::arg("factor"), py::arg("offset"),
          "Pads the stride of the dimension of `axis` so that stride % factor == offset.")
      .def(
          "double_buffer", [](PyStage &s) { s.stage.double_buffer(); }, "Double-buffers this stage's storage.")
      .def(
          "set_scope", [](PyStage &s, const std::string &scope) { s.stage.set_scope(scope); },
          "Sets the storage scope.")
      .def(
          "tensorize",
          [](PyStage &s, const IterVar &v, te::TensorIntrin intrin) { s.stage.tensorize(v, std::move(intrin)); },
          py::arg("var"), py::arg("tensor_intrin"), "Replaces the loop nest under `var` by a tensor intrinsic.");

  py::class_<te::TensorIntrinNode, std::shared_ptr<te::TensorIntrinNode>>(m, "TensorIntrin", "A hardware intrinsic.")
      .def_readonly("name", &te::TensorIntrinNode::name);
  bind_tensor_intrin(m);

  py::class_<te::Schedule, SchedulePtr>(m, "Schedule", "How a tensor expression is computed: one stage per operation.")
      .def("__getitem__",
           [](SchedulePtr s, py::object key) {
             if (py::isinstance<PyOp>(key)) return PyStage{s, (*s)[key.cast<PyOp>().op]};
             return PyStage{s, (*s)[key.cast<te::Tensor>()]};
           })
      .def_property_readonly("stages",
                             [](SchedulePtr s) {
                               std::vector<PyStage> out;
                               for (const auto &st : s->stages()) out.push_back(PyStage{s, te::Stage(st.get())});
                               return out;
                             })
      .def_property_readonly("outputs",
                             [](SchedulePtr s) {
                               std::vector<PyOp> out;
                               for (const auto &o : s->outputs()) out.push_back(PyOp{o});
                               return out;
                             })
      .def(
          "cache_read",
          [](SchedulePtr s, const te::Tensor &t, const std::string &scope, py::object readers) {
            return s->cache_read(t, scope, to_ops(readers));
          },
          py::arg("tensor"), py::arg("scope"), py::arg("readers"),
          "Adds a stage copying `tensor` into `scope`; `readers` read the copy. Returns the copy.")
      .def(
          "cache_write",
          [](SchedulePtr s, py::object t, const std::string &scope) -> py::object {
            if (py::isinstance<py::list>(t) || py::isinstance<py::tuple>(t))
              return py::cast(s->cache_write(to_tensors(t), scope));
            return py::cast(s->cache_write(t.cast<te::Tensor>(), scope));
          },
          py::arg("tensor"), py::arg("scope"),
          "Computes `tensor` into a new stage in `scope` that the tensor's stage copies out. Returns the cache tensor.")
      .def(
          "rfactor",
          [](SchedulePtr s, const te::Tensor &t, const IterVar &axis, int factor_axis) {
            return s->rfactor(t, axis, factor_axis);
          },
          py::arg("tensor"), py::arg("axis"), py::arg("factor_axis") = 0,
          "Factors the reduction of `tensor` over `axis` into a new stage. Returns the factored tensor.");

  m.def(
      "create_schedule", [](py::object ops) { return SchedulePtr(te::create_schedule(to_ops(ops))); }, py::arg("ops"),
      "A schedule for the given output operations (or tensors), every stage at its default loop nest.");
}

void bind_build(py::module_ &m) {
  py::class_<ir::Stmt>(m, "Stmt", "A statement of the lowered loop IR.")
      .def("__str__", [](const ir::Stmt &s) { return ir::to_string(s); })
      .def("__repr__", [](const ir::Stmt &s) { return ir::to_string(s); });
  py::class_<ir::LoweredFunc>(m, "LoweredFunc", "A lowered function: its parameters and loop-IR body.")
      .def_readonly("name", &ir::LoweredFunc::name)
      .def_readonly("body", &ir::LoweredFunc::body)
      .def_property_readonly("params",
                             [](const ir::LoweredFunc &f) {
                               std::vector<std::string> names;
                               for (const auto &p : f.params) names.push_back(p.name);
                               return names;
                             })
      .def("__str__", [](const ir::LoweredFunc &f) { return str_of(f); })
      .def("__repr__", [](const ir::LoweredFunc &f) { return str_of(f); });

  m.def(
      "lower",
      [](SchedulePtr s, py::object args, const std::string &name, bool simple_mode) -> py::object {
        auto f = lower::lower(*s, to_tensors(args), name);
        if (simple_mode) return py::cast(f.body);
        return py::cast(f);
      },
      py::arg("sch"), py::arg("args"), py::arg("name") = "main", py::arg("simple_mode") = false,
      "Lowers a schedule with its argument tensors to the loop IR; str() of the result reads as code.");

  py::class_<PyModule, std::shared_ptr<PyModule>>(m, "Module", "Compiled functions, callable on numpy arrays.")
      .def(
          "__call__", [](const PyModule &mod, py::args args) { call_packed(mod, mod.entry_name(), args); },
          "Runs the module's function on numpy arrays (in place where they are C-contiguous and 64-byte aligned).")
      .def("get_function",
           [](std::shared_ptr<PyModule> mod, const std::string &name) {
             py::cpp_function fn([mod, name](py::args args) { call_packed(*mod, name, args); });
             return fn;
           })
      .def_property_readonly("entry_name", [](const PyModule &mod) { return mod.entry_name(); })
      .def_property_readonly("target", [](const PyModule &mod) { return mod.options().target; })
      .def(
          "get_source",
          [](const PyModule &mod, const std::string &fmt) {
            if (fmt == "asm" || fmt == "s") return codegen::emit_assembly(mod.funcs(), mod.options());
            if (fmt == "ll" || fmt == "" || fmt == "llvm") return codegen::emit_llvm_ir(mod.funcs(), mod.options());
            throw UserError("get_source: unknown format '" + fmt + "' (ll or asm)");
          },
          py::arg("fmt") = "ll", "The module's code: optimised LLVM IR (\"ll\") or assembly (\"asm\").")
      .def(
          "export_library",
          [](const PyModule &mod, const std::string &path) {
            codegen::export_library(mod.funcs(), path, mod.options());
          },
          py::arg("path"), "Writes a shared library that kiln.runtime loads without the compiler.");

  m.def(
      "build",
      [](SchedulePtr s, py::object args, const std::string &target, const std::string &name) {
        return build_module({lower::lower(*s, to_tensors(args), name)}, target);
      },
      py::arg("sch"), py::arg("args"), py::arg("target") = "llvm", py::arg("name") = "default_function",
      "Lowers and compiles a schedule for a CPU target; returns a Module callable on numpy arrays.");
}

std::shared_ptr<PyModule> build_module(std::vector<ir::LoweredFunc> funcs, const std::string &target) {
  codegen::LLVMBuildOptions options;
  options.target = target;
  py::gil_scoped_release release;
  return std::make_shared<PyModule>(std::move(funcs), std::move(options));
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's C++ libraries, bound for Python. Use the kiln package rather than this module.";
  kiln::python::bind_errors(m);
  auto te = m.def_submodule("te", "Tensor expressions and schedules.");
  kiln::python::bind_te(te);
  kiln::python::bind_build(m);
  kiln::python::bind_ops(m.def_submodule("ops", "Operator templates, workloads and their config spaces."));
  kiln::python::bind_db(m.def_submodule("db", "The tuning log: best, top-k and history of measured configs."));
  kiln::python::bind_graph(m.def_submodule("graph", "ONNX models: import, optimize, run and compile."));
  kiln::python::bind_tune(m.def_submodule("tune", "Tuning jobs and their progress."));
}
