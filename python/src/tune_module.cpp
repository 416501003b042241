// kiln.tune: tuning jobs run in this process (tuner/tuner.h with a LocalMeasurer) or submitted to
// the tuning service (kilnd, through the command line's client cli/daemon_client.h), their progress
// reported to a Python callback.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/daemon_client.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "python/src/bindings.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

tuner::TuneTask tune_task(const py::handle &h) {
  tuner::TuneTask t;
  if (py::isinstance<ops::Task>(h)) {
    const auto &task = h.cast<const ops::Task &>();
    t.template_name = task.workload().template_name;
    t.args = task.workload().args;
  } else {
    auto pair = h.cast<py::tuple>();
    if (pair.size() != 2) throw py::type_error("a task is a kiln.ops.Task or a (template, args) pair");
    t.template_name = pair[0].cast<std::string>();
    t.args = contracts::Json::parse(py_to_json(pair[1]));
  }
  return t;
}

}  // namespace

void bind_tune(py::module_ m) {
  py::class_<tuner::TaskStatus>(m, "TaskStatus", "One task of a tuning job.")
      .def_readonly("name", &tuner::TaskStatus::name)
      .def_readonly("workload_key", &tuner::TaskStatus::workload_key)
      .def_readonly("flop", &tuner::TaskStatus::flop)
      .def_readonly("trials", &tuner::TaskStatus::trials)
      .def_readonly("valid", &tuner::TaskStatus::valid)
      .def_readonly("best_s", &tuner::TaskStatus::best_s, "The fastest mean seconds, None before a valid trial.")
      .def_readonly("default_s", &tuner::TaskStatus::default_s)
      .def_readonly("done", &tuner::TaskStatus::done, "Why the task left the rotation; empty while it is in it.")
      .def_readonly("errors", &tuner::TaskStatus::errors, "Failed trials by error class.")
      .def_property_readonly("best_gflops", &tuner::TaskStatus::best_gflops);

  py::class_<tuner::JobStatus>(m, "JobStatus", "Where a tuning job stands.")
      .def_readonly("job_id", &tuner::JobStatus::job_id)
      .def_readonly("state", &tuner::JobStatus::state, "running, done, paused, cancelled or failed.")
      .def_readonly("trials_done", &tuner::JobStatus::trials_done)
      .def_readonly("trials_total", &tuner::JobStatus::trials_total)
      .def_readonly("elapsed_s", &tuner::JobStatus::elapsed_s)
      .def_readonly("message", &tuner::JobStatus::message)
      .def_readonly("tasks", &tuner::JobStatus::tasks)
      .def_property_readonly("objective_s", &tuner::JobStatus::objective_s)
      .def("__str__", &tuner::format_status);

  m.def(
      "_run_embedded",
      [](py::object tasks, const std::string &log_path, const std::string &target, const std::string &device,
         int64_t trials, const std::string &strategy, int64_t batch_size, uint64_t seed, bool transfer, int threads,
         const std::string &name, const std::string &worker, std::optional<py::function> progress) {
        std::vector<tuner::TuneTask> tune_tasks;
        if (py::isinstance<ops::Task>(tasks) || py::isinstance<py::tuple>(tasks)) {
          tune_tasks.push_back(tune_task(tasks));
        } else {
          for (auto t : tasks) tune_tasks.push_back(tune_task(t));
        }
        tuner::TuneOptions options;
        options.trials = trials;
        options.strategy = strategy;
        options.batch_size = batch_size;
        options.seed = seed;
        options.transfer = transfer;
        db::TuningDb log = db::TuningDb::open(log_path);
        tuner::LocalMeasurerOptions lo;
        lo.worker_command = {worker, "--measure-worker"};
        if (threads > 0) lo.measure.set_threads(threads);
        tuner::LocalMeasurer measurer(target, lo);
        tuner::Tuner tuner(log, measurer, target, device);
        const int64_t job = tuner.create_job(name, tune_tasks, options);

        // The callback runs with the GIL after every batch; an exception it raises, or Ctrl-C,
        // pauses the job (what was measured stays in the log) and is raised here.
        std::atomic<bool> cancel{false};
        std::optional<py::error_already_set> raised;
        auto report = [&](const tuner::JobStatus &s) {
          py::gil_scoped_acquire gil;
          if (raised) return;
          try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (progress) (*progress)(s);
          } catch (py::error_already_set &e) {
            raised = std::move(e);
            cancel = true;
            measurer.cancel();
          }
        };
        tuner::JobStatus status;
        {
          py::gil_scoped_release release;
          status = tuner.run(job, report, &cancel);
        }
        if (raised) throw std::move(*raised);
        return status;
      },
      py::arg("tasks"), py::arg("log"), py::arg("target"), py::arg("device"), py::arg("trials"), py::arg("strategy"),
      py::arg("batch_size"), py::arg("seed"), py::arg("transfer"), py::arg("threads"), py::arg("name"),
      py::arg("worker"), py::arg("progress"));

  m.def(
      "_submit",
      [](py::object tasks, const std::string &daemon, const std::string &token_file, const std::string &target,
         const std::string &device, int64_t trials, const std::string &strategy, int64_t batch_size, uint64_t seed,
         const std::string &name, bool wait, std::optional<py::function> progress) {
        tuner::JobSubmission sub;
        if (py::isinstance<ops::Task>(tasks) || py::isinstance<py::tuple>(tasks)) {
          sub.tasks.push_back(tune_task(tasks));
        } else {
          for (auto t : tasks) sub.tasks.push_back(tune_task(t));
        }
        sub.name = name;
        sub.target = target;
        sub.device_key = device;
        sub.options.trials = trials;
        sub.options.strategy = strategy;
        sub.options.batch_size = batch_size;
        sub.options.seed = seed;
        cli::DaemonOptions options;
        options.address = daemon;
        options.token_file = token_file;
        cli::TunerClient client(options);
        tuner::JobReport report;
        {
          py::gil_scoped_release release;
          report = client.submit(sub);
        }
        if (!wait) return report.status;
        // The callback runs with the GIL on every report; an exception it raises, or Ctrl-C, stops
        // following (the job goes on in the service) and is raised here.
        std::optional<py::error_already_set> raised;
        tuner::JobStatus last = report.status;
        auto on_event = [&](const tuner::JobReport &r, bool) {
          py::gil_scoped_acquire gil;
          last = r.status;
          if (raised) return;
          try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (progress) (*progress)(r.status);
          } catch (py::error_already_set &e) {
            raised = std::move(e);
            client.stop_watching();
          }
        };
        {
          py::gil_scoped_release release;
          client.watch(report.status.job_id, on_event);
        }
        if (raised) throw std::move(*raised);
        return last;
      },
      py::arg("tasks"), py::arg("daemon"), py::arg("token_file"), py::arg("target"), py::arg("device"),
      py::arg("trials"), py::arg("strategy"), py::arg("batch_size"), py::arg("seed"), py::arg("name"), py::arg("wait"),
      py::arg("progress"));
}

}  // namespace kiln::python
