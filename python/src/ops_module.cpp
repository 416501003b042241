// kiln.ops: the operator library's templates, tasks (a workload on a target), their config spaces
// and configs, bound over compiler/ops/registry.h and compiler/autotune/config_space.h.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace kiln::python {

py::object json_to_py(const std::string &text) { return py::module_::import("json").attr("loads")(text); }

std::string py_to_json(const py::handle &value) {
  return contracts::Json::parse(py::module_::import("json").attr("dumps")(value).cast<std::string>()).dump();
}

namespace {

// A config space with the generator its sample() draws from.
struct PySpace {
  autotune::ConfigSpace space;
  std::shared_ptr<std::mt19937_64> rng;
};

py::dict knobs_of(const autotune::Config &c) {
  py::dict d;
  for (const auto &[name, value] : c.record().knobs) d[py::str(name)] = json_to_py(value.dump());
  return d;
}

autotune::Config config_from(const ops::Task &task, const py::handle &cfg) {
  if (py::isinstance<autotune::Config>(cfg)) {
    auto c = cfg.cast<autotune::Config>();
    task.space().check(c);
    return c;
  }
  if (py::isinstance<py::int_>(cfg)) return task.space().get(cfg.cast<int64_t>());
  if (py::isinstance<py::dict>(cfg)) return task.space().parse_config_text(py_to_json(cfg), task.default_config());
  if (py::isinstance<py::str>(cfg))
    return task.space().parse_config_text(cfg.cast<std::string>(), task.default_config());
  throw py::type_error("a config is a kiln.ops.Config, an index, a dict of knob values or knob=value text");
}

}  // namespace

void bind_ops(py::module_ m) {
  m.def(
      "templates", []() { return ops::Registry::builtin().names(); }, "The names of the operator templates.");

  py::class_<ops::ArgumentSpec>(m, "Argument", "One argument of a template.")
      .def_readonly("name", &ops::ArgumentSpec::name)
      .def_readonly("type", &ops::ArgumentSpec::type)
      .def_readonly("default", &ops::ArgumentSpec::default_value)
      .def_readonly("description", &ops::ArgumentSpec::description)
      .def_property_readonly("required", &ops::ArgumentSpec::required)
      .def("__repr__", [](const ops::ArgumentSpec &a) { return "Argument(" + a.name + ": " + a.type + ")"; });

  py::class_<ops::Template, std::shared_ptr<ops::Template>>(m, "Template", "An operator template of the library.")
      .def_readonly("name", &ops::Template::name)
      .def_readonly("version", &ops::Template::version)
      .def_readonly("summary", &ops::Template::summary)
      .def_readonly("arguments", &ops::Template::arguments)
      .def_property_readonly(
          "example", [](const ops::Template &t) { return json_to_py(t.example.dump()); },
          "The arguments of a small workload.")
      .def("__repr__", [](const ops::Template &t) { return "Template(" + t.name + ")"; });

  m.def(
      "template",
      [](const std::string &name) {
        return std::const_pointer_cast<ops::Template>(ops::Registry::builtin().get(name));
      },
      py::arg("name"), "The template of this name; OpError lists the known ones.");

  py::class_<autotune::Config>(m, "Config", "One point of a config space: a value per knob.")
      .def_property_readonly("index", &autotune::Config::index)
      .def_property_readonly("knobs", &knobs_of, "The knob values, in definition order.")
      .def("__getitem__",
           [](const autotune::Config &c, const std::string &knob) { return json_to_py(c.value(knob).dump()); })
      .def("to_json", &autotune::Config::to_json, "The canonical JSON (index, knobs, space fingerprint).")
      .def("__eq__", [](const autotune::Config &a, const autotune::Config &b) { return a == b; })
      .def("__hash__", [](const autotune::Config &c) { return std::hash<std::string>()(c.to_json()); })
      .def("__str__", &autotune::Config::to_string)
      .def("__repr__", [](const autotune::Config &c) { return "Config(" + c.to_string() + ")"; });

  py::class_<PySpace>(m, "ConfigSpace", "The knobs of a task and every combination of their values.")
      .def(
          "__len__", [](const PySpace &s) { return s.space.size(); },
          "The raw size: the product of the knob sizes (count_valid() counts those meeting the constraints).")
      .def_property_readonly("size", [](const PySpace &s) { return s.space.size(); })
      .def("count_valid", [](const PySpace &s) { return s.space.count_valid(); })
      .def(
          "get", [](const PySpace &s, int64_t index) { return s.space.get(index); }, py::arg("index"),
          "The config with this index; ConfigError outside [0, len(space)).")
      .def("__getitem__", [](const PySpace &s, int64_t index) { return s.space.get(index); })
      .def(
          "sample",
          [](PySpace &s, std::optional<uint64_t> seed) {
            if (seed) s.rng->seed(*seed);
            return s.space.sample(*s.rng);
          },
          py::arg("seed") = py::none(), "A config drawn uniformly among the valid ones (seed: restart the generator).")
      .def("is_valid", [](const PySpace &s, const autotune::Config &c) { return s.space.is_valid(c); })
      .def(
          "from_values",
          [](const PySpace &s, const py::dict &values) {
            std::vector<std::pair<std::string, contracts::Json>> v;
            for (auto [k, x] : values) v.emplace_back(k.cast<std::string>(), contracts::Json::parse(py_to_json(x)));
            return s.space.from_values(v);
          },
          py::arg("values"), "The config with these knob values; knobs not given take their first value.")
      .def_property_readonly("knobs",
                             [](const PySpace &s) {
                               std::vector<std::string> names;
                               for (const auto &k : s.space.knobs()) names.push_back(k.name);
                               return names;
                             })
      .def_property_readonly("fingerprint", [](const PySpace &s) { return s.space.fingerprint(); })
      .def("__str__", [](const PySpace &s) { return s.space.to_string(); })
      .def("__repr__", [](const PySpace &s) { return "ConfigSpace(" + std::to_string(s.space.size()) + " configs)"; });

  py::class_<ops::Task, std::shared_ptr<ops::Task>>(m, "Task", "A workload (a template and its arguments) on a target.")
      .def_property_readonly("key", &ops::Task::key, "The workload key the tuning log stores it under.")
      .def_property_readonly("template", [](const ops::Task &t) { return t.workload().template_name; })
      .def_property_readonly(
          "args", [](const ops::Task &t) { return json_to_py(t.workload().args_json); },
          "The canonical arguments (defaults filled in).")
      .def_property_readonly("target", [](const ops::Task &t) { return t.target().str(); })
      .def_property_readonly("flop", &ops::Task::flop)
      .def_property_readonly("config_space",
                             [](const ops::Task &t) {
                               return PySpace{t.space(), std::make_shared<std::mt19937_64>(std::random_device{}())};
                             })
      .def("default_config", &ops::Task::default_config, "The config a build without tuning uses.")
      .def(
          "config", [](const ops::Task &t, py::object cfg) { return config_from(t, cfg); }, py::arg("config"),
          "A config of this task from an index, a dict of knob values or knob=value text (other knobs default).")
      .def(
          "instantiate",
          [](const ops::Task &t, py::object cfg) {
            ops::Instance inst = t.instantiate(config_from(t, cfg));
            return py::make_tuple(SchedulePtr(std::move(inst.schedule)), inst.compute.args());
          },
          py::arg("config"), "The schedule for a config and its argument tensors (inputs, then outputs).")
      .def(
          "lower",
          [](const ops::Task &t, py::object cfg, const std::string &name) {
            return t.lower(config_from(t, cfg), name);
          },
          py::arg("config"), py::arg("name") = "", "The config's function in the loop IR.")
      .def(
          "build",
          [](const ops::Task &t, py::object cfg) {
            return build_module({t.lower(config_from(t, cfg))}, t.target().str());
          },
          py::arg("config"), "Compiles a config; returns a Module callable on numpy arrays (inputs, then outputs).")
      .def("__repr__", [](const ops::Task &t) {
        return "Task(" + t.workload().template_name + " " + t.workload().args_json + ", " + t.target().str() + ")";
      });

  m.def(
      "task",
      [](const std::string &template_name, py::object args, const std::string &target) {
        contracts::Json a = args.is_none() ? ops::Registry::builtin().get(template_name)->example
                                           : contracts::Json::parse(py_to_json(args));
        return std::make_shared<ops::Task>(template_name, a, driver::resolve_target(target));
      },
      py::arg("template"), py::arg("args") = py::none(), py::arg("target") = "llvm",
      "The task of a template with arguments (a dict; None: the template's example) on a target.");
}

}  // namespace kiln::python
