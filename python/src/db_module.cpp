// kiln.db: the tuning log (db/tuning_db.h) with its records as plain Python objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/registry.h"
#include "db/error.h"
#include "db/job.h"
#include "db/target.h"
#include "db/tuning_db.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// A workload given as a key or as a kiln.ops.Task.
std::string key_of(const py::handle &workload) {
  if (py::isinstance<ops::Task>(workload)) return workload.cast<const ops::Task &>().key();
  return workload.cast<std::string>();
}

// The target to look under: the given target string (else the task's), on the given device class,
// else on the one device class the log has measured that target on.
std::optional<db::Target> target_of(db::TuningDb &log, const py::handle &workload,
                                    const std::optional<std::string> &target,
                                    const std::optional<std::string> &device) {
  std::string t;
  if (target) {
    t = *target;
  } else if (py::isinstance<ops::Task>(workload)) {
    t = workload.cast<const ops::Task &>().target().str();
  } else {
    throw UserError("kiln.db: give the target of a workload given by its key");
  }
  if (device) return db::Target::make(t, *device);
  return log.only_target_named(t);
}

}  // namespace

void bind_db(py::module_ m) {
  py::class_<db::Record>(m, "Record", "One measurement of one config of a workload on a target.")
      .def_readonly("id", &db::Record::id)
      .def_property_readonly("workload_key", [](const db::Record &r) { return r.workload.key; })
      .def_property_readonly("template", [](const db::Record &r) { return r.workload.template_name; })
      .def_property_readonly("args", [](const db::Record &r) { return json_to_py(r.workload.args); })
      .def_property_readonly("target", [](const db::Record &r) { return r.target.target; })
      .def_property_readonly("device", [](const db::Record &r) { return r.target.device_key; })
      .def_readonly("job_id", &db::Record::job_id)
      .def_property_readonly("config_index", [](const db::Record &r) { return r.config.index; })
      .def_property_readonly(
          "space", [](const db::Record &r) { return r.config.space; },
          "The fingerprint of the config space the config belongs to.")
      .def_property_readonly(
          "knobs",
          [](const db::Record &r) {
            py::dict d;
            for (const auto &[name, value] : r.config.knobs) d[py::str(name)] = json_to_py(value.dump());
            return d;
          },
          "The config's knob values; task.config(record.knobs) makes it a config of the task.")
      .def_property_readonly("error", [](const db::Record &r) { return std::string(db::to_string(r.error)); })
      .def_readonly("error_message", &db::Record::error_message)
      .def_property_readonly("valid", &db::Record::valid)
      .def_readonly("costs", &db::Record::costs, "Seconds, one per repeat.")
      .def_property_readonly("mean", &db::Record::mean, "The mean cost in seconds (NaN for a failure).")
      .def_readonly("wall_s", &db::Record::wall_s)
      .def_readonly("runner", &db::Record::runner)
      .def_readonly("kiln_version", &db::Record::kiln_version)
      .def_readonly("timestamp", &db::Record::timestamp)
      .def("__repr__", [](const db::Record &r) {
        return "Record(" + r.workload.template_name + " #" + std::to_string(r.config.index) + ", " +
               std::string(db::to_string(r.error)) + (r.valid() ? ", " + std::to_string(r.mean() * 1e6) + " us" : "") +
               ")";
      });

  py::class_<db::Job>(m, "Job", "A tuning job recorded in the log.")
      .def_readonly("id", &db::Job::id)
      .def_readonly("name", &db::Job::name)
      .def_property_readonly("state", [](const db::Job &j) { return std::string(db::to_string(j.state)); })
      .def_readonly("trials_total", &db::Job::trials_total)
      .def_readonly("trials_done", &db::Job::trials_done)
      .def_readonly("message", &db::Job::message)
      .def("__repr__", [](const db::Job &j) {
        return "Job(" + std::to_string(j.id) + ", " + std::string(db::to_string(j.state)) + ", " +
               std::to_string(j.trials_done) + "/" + std::to_string(j.trials_total) + ")";
      });

  py::class_<db::TuningDb>(m, "TuningLog", "An open tuning log (one connection; use it from one thread).")
      .def_property_readonly("path", &db::TuningDb::path)
      .def(
          "best",
          [](db::TuningDb &log, py::object workload, std::optional<std::string> target,
             std::optional<std::string> device) -> std::optional<db::Record> {
            auto t = target_of(log, workload, target, device);
            if (!t) return std::nullopt;
            return log.best(key_of(workload), *t);
          },
          py::arg("workload"), py::arg("target") = py::none(), py::arg("device") = py::none(),
          "The fastest valid record of a workload (a key or a kiln.ops.Task) on a target, or None.")
      .def(
          "top_k",
          [](db::TuningDb &log, py::object workload, int64_t k, std::optional<std::string> target,
             std::optional<std::string> device) {
            auto t = target_of(log, workload, target, device);
            if (!t) return std::vector<db::Record>{};
            return log.top_k(key_of(workload), *t, k);
          },
          py::arg("workload"), py::arg("k"), py::arg("target") = py::none(), py::arg("device") = py::none(),
          "Up to k valid records, fastest first.")
      .def(
          "history",
          [](db::TuningDb &log, const std::string &template_name, const std::string &device, bool valid_only,
             int64_t limit) {
            return log.history(db::HistoryQuery{template_name, device, valid_only, limit});
          },
          py::arg("template"), py::arg("device"), py::arg("valid_only") = false, py::arg("limit") = 0,
          "Every record of a template on a device class, oldest first.")
      .def(
          "records",
          [](db::TuningDb &log) {
            std::vector<db::Record> out;
            log.for_each_record({}, [&](const db::Record &r) { out.push_back(r); });
            return out;
          },
          "Every record, oldest first.")
      .def("jobs", &db::TuningDb::jobs)
      .def("job", &db::TuningDb::job, py::arg("id"))
      .def("__repr__", [](const db::TuningDb &log) { return "TuningLog(" + log.path() + ")"; });

  m.def(
      "open",
      [](const std::string &path, bool create, bool read_only) {
        db::TuningDbOptions options;
        options.create = create;
        options.read_only = read_only;
        return std::make_unique<db::TuningDb>(db::TuningDb::open(path, options));
      },
      py::arg("path"), py::arg("create") = false, py::arg("read_only") = false,
      "Opens a tuning log. TuningDbError when it is missing (unless create=True) or not a tuning log.");
}

}  // namespace kiln::python
