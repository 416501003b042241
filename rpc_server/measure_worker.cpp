#include "rpc_server/measure_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contracts/json.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/error.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/op.h"
#include "compiler/lower/lower.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "deploy/module.h"
#include "deploy/tensor.h"
#include "deploy/thread_pool.h"
#include "kiln/v1/worker.pb.h"
#include "rpc_server/wire.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/measure_extension.h"
#include "rpc_server/output_comparison.h"
#include "rpc_server/random_inputs.h"
#include "rpc_server/time_evaluator.h"
#include "rpc_server/worker_process.h"

namespace kiln::rpc {

namespace {

using contracts::Json;
using Clock = std::chrono::steady_clock;
using kiln::v1::ErrorClass;

constexpr size_t kCachedWorkloads = 4;
const char *const kCandidateName = "kiln_candidate";
const char *const kReferenceName = "kiln_reference";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A failure with its class, thrown inside a build or a run and turned into the result.
struct Failure {
  ErrorClass error;
  std::string message;
};

// --- tensors ---

std::vector<int64_t> const_shape(const te::Tensor &t) {
  std::vector<int64_t> shape;
  for (const auto &d : t.shape()) {
    auto c = ir::as_const_int(d);
    if (!c) throw Failure{v1::UNKNOWN, "tensor " + t.name() + " has a symbolic shape"};
    shape.push_back(*c);
  }
  return shape;
}

// "float32[4,8];float32[8,8]->float32[4,8]": what inputs, outputs and the reference depend on.
std::string shape_signature(const ops::Compute &c) {
  std::ostringstream os;
  auto put = [&](const std::vector<te::Tensor> &ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      os << (i ? ";" : "") << ts[i].dtype().to_string() << "[";
      const auto shape = const_shape(ts[i]);
      for (size_t d = 0; d < shape.size(); ++d) os << (d ? "," : "") << shape[d];
      os << "]";
    }
  };
  put(c.inputs);
  os << "->";
  put(c.outputs);
  return os.str();
}

deploy::Tensor make_tensor(const te::Tensor &t) {
  return deploy::Tensor::empty(const_shape(t), ir::to_deploy_dtype(t.dtype()));
}

// --- configs ---

// The config a wire config denotes in `task`'s space. An index of 0 is the wire's unset value and
// is not compared with the knobs.
autotune::Config task_config(const ops::Task &task, const v1::Config &c) {
  return task.space().from_record(config_from_proto(c), c.index() != 0);
}

// --- the worker ---

// Inputs, output buffers and the reference for one set of tensor shapes of a workload.
struct ShapeData {
  std::vector<deploy::Tensor> inputs;         // on the host
  std::vector<deploy::Tensor> device_inputs;  // the same on the device
  std::vector<std::string> output_names;
  std::vector<deploy::Tensor> outputs;    // on the device, written by every candidate in turn
  std::vector<deploy::Tensor> reference;  // empty until computed
  bool reference_tried = false;
  std::string reference_error;
};

struct WorkloadEntry {
  std::unique_ptr<ops::Task> task;
  std::unique_ptr<DeviceBackend> backend;  // for the workload's target
  uint64_t seed = 0;
  std::map<std::string, std::shared_ptr<ShapeData>> shapes;
};

struct Built {
  std::shared_ptr<WorkloadEntry> workload;  // keeps the task alive
  std::shared_ptr<ShapeData> data;
  std::unique_ptr<DeviceKernel> kernel;
  std::unique_ptr<CandidateHooks> hooks;  // from the runner's extension; null for none
  double compile_seconds = 0;
};

uint64_t seed_of(const std::string &key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : key) h = (h ^ ch) * 1099511628211ull;
  return h;
}

class Worker {
 public:
  Worker(int fd, const MeasureExtension &extension)
      : fd_(fd), extension_(extension), registry_(extended_registry(extension)) {}

  int serve() {
    v1::WorkerReply ready;
    ready.mutable_ready()->set_pid(::getpid());
    if (!write_frame(fd_, ready)) return 1;
    std::string payload;
    while (read_frame(fd_, &payload)) {
      v1::WorkerRequest req;
      if (!req.ParseFromString(payload)) {
        std::fprintf(stderr, "measure worker: a request could not be parsed\n");
        return 1;
      }
      v1::WorkerReply reply;
      const auto t0 = Clock::now();
      if (req.has_build()) {
        *reply.mutable_result() = build(req.build());
      } else if (req.has_run()) {
        *reply.mutable_result() = run(req.run());
      } else {
        built_.clear();
        continue;
      }
      reply.mutable_result()->set_busy_seconds(seconds_since(t0));
      if (!write_frame(fd_, reply)) return 1;
      // A device left unusable (a GPU context after an illegal address): a fresh worker takes over.
      for (const auto &entry : workloads_) {
        if (entry.second->backend && entry.second->backend->lost()) return 0;
      }
    }
    return 0;
  }

 private:
  std::shared_ptr<WorkloadEntry> workload(const v1::Workload &w, const std::string &target) {
    const std::string id = w.template_name() + "\n" + w.args_json() + "\n" + target;
    for (auto it = workloads_.begin(); it != workloads_.end(); ++it) {
      if (it->first == id) {
        workloads_.splice(workloads_.begin(), workloads_, it);
        return it->second;
      }
    }
    auto e = std::make_shared<WorkloadEntry>();
    try {
      e->task = std::make_unique<ops::Task>(w.template_name(), Json::parse(w.args_json()),
                                            driver::resolve_target(target), registry_);
    } catch (const UserError &err) {
      throw Failure{v1::INSTANTIATION, err.what()};
    }
    try {
      e->backend = make_device_backend(target);
    } catch (const UserError &err) {
      throw Failure{v1::COMPILE_DEVICE, err.what()};
    }
    e->seed = seed_of(e->task->key());
    workloads_.emplace_front(id, e);
    if (workloads_.size() > kCachedWorkloads) workloads_.pop_back();
    return e;
  }

  std::shared_ptr<ShapeData> shape_data(WorkloadEntry &w, const ops::Compute &c) {
    const std::string sig = shape_signature(c);
    auto &slot = w.shapes[sig];
    if (slot) return slot;
    auto d = std::make_shared<ShapeData>();
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      d->inputs.push_back(make_tensor(c.inputs[i]));
      try {
        fill_random_inputs(d->inputs.back(), w.seed + 0x9e3779b97f4a7c15ull * (i + 1));
      } catch (const UserError &e) {
        throw Failure{v1::UNKNOWN, e.what()};
      }
      d->device_inputs.push_back(w.backend->to_device(d->inputs.back()));
    }
    for (const auto &o : c.outputs) {
      d->outputs.push_back(w.backend->to_device(make_tensor(o)));
      d->output_names.push_back(o.name());
    }
    slot = d;
    return d;
  }

  // The outputs of an unscheduled lowering of the same compute on the same inputs, computed on
  // the host CPU.
  void compute_reference(const ops::Task &task, const autotune::Config &cfg, ShapeData &d, const std::string &target) {
    d.reference_tried = true;
    try {
      ops::Compute c = task.compute(cfg);
      auto sch = te::create_schedule(c.outputs);
      ir::LoweredFunc f = lower::lower(*sch, c.args(), kReferenceName);
      codegen::LLVMBuildOptions opt;
      opt.target = reference_target(target);
      codegen::LLVMModule m(f, opt);
      std::vector<deploy::Tensor> args = d.inputs, outs;
      for (const auto &o : c.outputs) outs.push_back(make_tensor(o));
      args.insert(args.end(), outs.begin(), outs.end());
      m.call(kReferenceName, args);
      d.reference = outs;
    } catch (const std::exception &e) {
      d.reference_error = e.what();
    }
  }

  v1::WorkerResult build(const v1::WorkerBuild &req) {
    v1::WorkerResult r;
    r.set_candidate_id(req.candidate_id());
    auto *res = r.mutable_result();
    const auto t0 = Clock::now();
    double reference_seconds = 0;
    try {
      std::shared_ptr<WorkloadEntry> w = workload(req.workload(), req.target());
      const ops::Task &task = *w->task;
      autotune::Config cfg;
      ops::Compute compute;
      try {
        cfg = task_config(task, req.config());
        compute = task.compute(cfg);
      } catch (const UserError &e) {
        throw Failure{v1::INSTANTIATION, e.what()};
      }
      auto b = std::make_unique<Built>();
      b->workload = w;
      if (extension_.hooks) b->hooks = extension_.hooks(task.templ().name, cfg);
      b->data = shape_data(*w, compute);
      if (req.check_correctness()) {
        // The runner times the reference and the compilation separately.
        const auto tr = Clock::now();
        if (!b->data->reference_tried) compute_reference(task, cfg, *b->data, req.target());
        reference_seconds = seconds_since(tr);
        v1::WorkerReply progress;
        progress.mutable_reference_done()->set_candidate_id(req.candidate_id());
        write_frame(fd_, progress);
        if (b->data->reference.empty()) {
          throw Failure{v1::UNKNOWN, "cannot compute the reference output: " + b->data->reference_error};
        }
      }
      if (b->hooks) b->hooks->before_compile(req.build_timeout_ms());
      ir::LoweredFunc f;
      try {
        f = task.lower(cfg, kCandidateName);
      } catch (const ScheduleError &e) {
        throw Failure{v1::INSTANTIATION, e.what()};
      } catch (const UserError &e) {
        throw Failure{v1::INSTANTIATION, e.what()};
      } catch (const std::bad_alloc &) {
        throw Failure{v1::COMPILE_HOST, "out of memory while lowering"};
      } catch (const std::exception &e) {
        throw Failure{v1::COMPILE_HOST, std::string("lowering failed: ") + e.what()};
      }
      try {
        b->kernel = w->backend->compile(f, req.target());
      } catch (const DeviceCompileError &e) {
        throw Failure{v1::COMPILE_DEVICE, e.what()};
      } catch (const codegen::NvrtcError &e) {
        throw Failure{v1::COMPILE_DEVICE, e.what()};
      } catch (const std::bad_alloc &) {
        throw Failure{v1::COMPILE_HOST, "out of memory while compiling"};
      } catch (const std::exception &e) {
        throw Failure{v1::COMPILE_HOST, e.what()};
      }
      b->compile_seconds = seconds_since(t0) - reference_seconds;
      res->set_compile_seconds(b->compile_seconds);
      res->set_error(v1::OK);
      built_[req.candidate_id()] = std::move(b);
    } catch (const Failure &f) {
      res->set_error(f.error);
      res->set_message(f.message);
    } catch (const std::bad_alloc &) {
      res->set_error(v1::UNKNOWN);
      res->set_message("out of memory while preparing the candidate");
    } catch (const std::exception &e) {
      res->set_error(v1::UNKNOWN);
      res->set_message(e.what());
    }
    if (res->error() != v1::OK) res->set_compile_seconds(seconds_since(t0) - reference_seconds);
    return r;
  }

  v1::WorkerResult run(const v1::WorkerRun &req) {
    v1::WorkerResult r;
    r.set_candidate_id(req.candidate_id());
    auto *res = r.mutable_result();
    auto it = built_.find(req.candidate_id());
    if (it == built_.end()) {
      res->set_error(v1::UNKNOWN);
      res->set_message("candidate " + std::to_string(req.candidate_id()) + " was not built by this worker");
      return r;
    }
    std::unique_ptr<Built> b = std::move(it->second);
    built_.erase(it);
    res->set_compile_seconds(b->compile_seconds);
    const v1::MeasureOptions &o = req.options();
    try {
      DeviceBackend &device = *b->workload->backend;
      device.set_threads(static_cast<int>(o.threads()));
      ShapeData &d = *b->data;
      for (auto &out : d.outputs) device.fill_bytes(out, 0xff);
      std::vector<deploy::Tensor> tensors = d.device_inputs;
      tensors.insert(tensors.end(), d.outputs.begin(), d.outputs.end());
      const std::function<void()> call = b->kernel->bind(tensors);
      bool warm_up = true;
      const bool check = !o.has_check_correctness() || o.check_correctness();
      std::string mismatch;

      TimeEvaluatorOptions eval;
      eval.number = o.number();
      eval.repeat = o.repeat();
      eval.min_repeat_ms = o.min_repeat_ms();
      eval.clock = device.clock();
      eval.deterministic = device.deterministic_clock();
      if (o.cpu_cache_flush()) {
        eval.before_repeat = [&] { device.flush_caches(d.device_inputs); };
      }
      eval.after_warmup = [&] {
        warm_up = false;
        std::vector<deploy::Tensor> got;
        for (const auto &out : d.outputs) got.push_back(device.to_host(out));
        if (b->hooks) b->hooks->inspect_outputs(got);
        if (!check) return true;
        for (size_t i = 0; i < got.size() && mismatch.empty(); ++i) {
          mismatch = compare_output(got[i], d.reference.at(i), i, d.output_names[i]);
        }
        return mismatch.empty();
      };
      const Timing t = time_evaluate(
          [&] {
            call();
            if (warm_up && b->hooks) b->hooks->after_warmup_call();
          },
          eval);
      r.set_number(t.number);
      if (t.stopped_after_warmup) {
        res->set_error(v1::WRONG_ANSWER);
        res->set_message(mismatch);
      } else {
        res->set_error(v1::OK);
        for (double s : t.seconds) res->add_seconds(s);
      }
    } catch (const deploy::KernelError &e) {
      res->set_error(v1::RUNTIME_DEVICE);
      res->set_message(std::string("the kernel failed (status ") + std::to_string(e.code()) + "): " + e.what());
    } catch (const std::bad_alloc &) {
      res->set_error(v1::RUNTIME_DEVICE);
      res->set_message("out of memory while running (std::bad_alloc)");
    } catch (const std::exception &e) {
      res->set_error(v1::UNKNOWN);
      res->set_message(e.what());
    }
    return r;
  }

  int fd_;
  const MeasureExtension &extension_;
  ops::Registry registry_;
  std::list<std::pair<std::string, std::shared_ptr<WorkloadEntry>>> workloads_;  // most recent first
  std::map<uint64_t, std::unique_ptr<Built>> built_;
};

// Ends the worker when the runner is gone, also while a candidate runs forever.
void watch_parent() {
  const pid_t parent = ::getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (::getppid() != parent) _exit(0);
    }
  }).detach();
}

}  // namespace

int measure_worker_main(const MeasureExtension &extension) {
  if (::fcntl(kWorkerChannelFd, F_GETFD) < 0) {
    std::fprintf(stderr,
                 "this is a measurement worker of a Kiln runner; it is started by the runner, which gives it its "
                 "channel on descriptor %d\n",
                 kWorkerChannelFd);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  watch_parent();
  try {
    Worker w(kWorkerChannelFd, extension);
    return w.serve();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "measure worker: %s\n", e.what());
    return 1;
  }
}

}  // namespace kiln::rpc
