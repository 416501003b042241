#include "rpc_server/measure_pool.h"

#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "contracts/json.h"
#include "contracts/target.h"
#include "compiler/driver/target.h"
#include "compiler/ir/op.h"
#include "compiler/ops/registry.h"
#include "deploy/thread_pool.h"
#include "deploy/version.h"
#include "kiln/v1/worker.pb.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/worker_process.h"

namespace kiln::rpc {

namespace {

using Clock = std::chrono::steady_clock;
using kiln::v1::ErrorClass;
using kiln::v1::MeasureResult;

// Time a new worker may take to start (exec, loading libraries) before a request's own timeout
// starts counting.
constexpr int kStartupGraceMs = 30000;
// Builds given to each worker per round; they wait in the worker, compiled, until they run.
constexpr size_t kBuildsPerWorker = 8;
// A candidate whose built code was lost this often with its worker is answered INFRA.
constexpr int kMaxLosses = 3;
// Messages in results are cut to this length.
constexpr size_t kMaxMessageBytes = 4096;
// Parsed workloads the runner keeps for checking later batches.
constexpr size_t kCheckedWorkloads = 16;

double steady_seconds(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

std::optional<MeasureRejection> over_limit(const char *field, uint64_t value, uint64_t limit) {
  if (value <= limit) return std::nullopt;
  return MeasureRejection(std::string("MeasureOptions.") + field + " is " + std::to_string(value) +
                              ", above the runner's limit of " + std::to_string(limit),
                          MeasureRejection::Reason::kOverLimit);
}

}  // namespace

std::optional<MeasureRejection> check_options(const v1::MeasureOptions &o, const MeasureLimits &l) {
  for (const std::optional<MeasureRejection> &p :
       {over_limit("number", o.number(), l.max_number), over_limit("repeat", o.repeat(), l.max_repeat),
        over_limit("min_repeat_ms", o.min_repeat_ms(), l.max_min_repeat_ms),
        over_limit("build_timeout_ms", o.build_timeout_ms(), l.max_timeout_ms),
        over_limit("run_timeout_ms", o.run_timeout_ms(), l.max_timeout_ms),
        over_limit("cooldown_ms", o.cooldown_ms(), l.max_cooldown_ms),
        over_limit("threads", o.threads(), l.max_threads)}) {
    if (p) return p;
  }
  return std::nullopt;
}

v1::MeasureOptions with_defaults(v1::MeasureOptions o) {
  if (o.number() == 0) o.set_number(1);
  if (o.repeat() == 0) o.set_repeat(3);
  if (!o.has_min_repeat_ms()) o.set_min_repeat_ms(10);
  if (o.build_timeout_ms() == 0) o.set_build_timeout_ms(10000);
  if (o.run_timeout_ms() == 0) o.set_run_timeout_ms(10000);
  if (!o.has_check_correctness()) o.set_check_correctness(true);
  if (o.threads() == 0) o.set_threads(static_cast<uint32_t>(deploy::physical_core_count()));
  return o;
}

namespace {

struct WorkerSlot {
  enum class Doing { Nothing, Build, Run };

  int index = 0;
  WorkerProcess process;
  bool ready = false;
  bool spawned = false;  // a process was started for this slot before
  Doing doing = Doing::Nothing;
  size_t item = 0;  // the candidate of the request in progress
  Clock::time_point sent, deadline;
  bool reference_phase = false;  // a build computing its workload's reference output
  std::deque<size_t> queue;      // builds of this round not yet started
};

struct Item {
  enum class State { Pending, Queued, Building, Built, Running, Done };
  State state = State::Pending;
  int worker = -1;
  uint64_t id = 0;
  double compile_seconds = 0;
  int losses = 0;
};

// Everything the pool keeps between calls.
struct PoolState {
  MeasurePoolOptions options;
  ops::Registry registry;
  ops::Target target;  // what this runner compiles for
  std::string kiln_version;
  std::mutex mutex;  // one measure() at a time
  std::vector<std::unique_ptr<WorkerSlot>> workers;
  std::atomic<int> started{0};
  std::atomic<int> restarted{0};
  uint64_t next_id = 1;
  // Workloads already checked, with why they are refused (nullopt when acceptable); most recent
  // first.
  std::list<std::pair<std::string, std::optional<MeasureRejection>>> checked;

  explicit PoolState(MeasurePoolOptions o)
      : options(std::move(o)),
        registry(extended_registry(options.extension)),
        target(driver::resolve_target(
            driver::concrete_target(options.target.empty() ? "llvm -mcpu=native" : options.target))) {
    kiln_version = options.kiln_version.empty() ? deploy::version() : options.kiln_version;
    int n = options.build_workers > 0 ? options.build_workers
                                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < n; ++i) {
      workers.push_back(std::make_unique<WorkerSlot>());
      workers.back()->index = i;
    }
  }

  const MeasureLimits &limits() const { return options.limits; }
  std::optional<MeasureRejection> check_workload(const v1::Workload &w);
  std::optional<MeasureRejection> check_batch(const std::vector<Candidate> &batch, const v1::MeasureOptions &options);
};

// One call of measure(): the state of every candidate and the event loop over the workers.
class MeasureCall {
 public:
  MeasureCall(PoolState &pool, const std::vector<Candidate> &batch, const v1::MeasureOptions &options,
              const std::function<void(size_t, const MeasureResult &)> &on_result, const std::atomic<bool> *cancel)
      : pool_(pool),
        batch_(batch),
        options_(options),
        on_result_(on_result),
        cancel_(cancel),
        items_(batch.size()),
        check_(!options.has_check_correctness() || options.check_correctness()) {}

  void run() {
    while (done_ < items_.size()) {
      if (cancelled()) {
        for (size_t i = 0; i < items_.size(); ++i) {
          if (items_[i].state != Item::State::Done) finish_error(i, v1::INFRA, "cancelled");
        }
        break;
      }
      build_round();
      run_round();
    }
    if (cancel_seen_) forget_built();
  }

 private:
  bool cancelled() {
    if (cancel_ && cancel_->load()) cancel_seen_ = true;
    return cancel_seen_;
  }

  void finish(size_t i, MeasureResult r) {
    Item &item = items_[i];
    if (item.state == Item::State::Done) return;
    if (r.compile_seconds() == 0) r.set_compile_seconds(item.compile_seconds);
    if (r.error() != v1::OK) r.clear_seconds();
    if (r.message().size() > kMaxMessageBytes) {
      // Cut at a character boundary: the field must stay valid UTF-8.
      size_t n = kMaxMessageBytes;
      while (n > 0 && (static_cast<unsigned char>(r.message()[n]) & 0xc0) == 0x80) --n;
      r.mutable_message()->resize(n);
    }
    r.set_runner_id(pool_.options.runner_id);
    r.set_kiln_version(pool_.kiln_version);
    r.set_target(pool_.target.str());
    item.state = Item::State::Done;
    ++done_;
    if (pool_.options.observe_result) pool_.options.observe_result(r);
    on_result_(i, r);
  }

  void finish_error(size_t i, ErrorClass error, const std::string &message) {
    MeasureResult r;
    r.set_error(error);
    r.set_message(message);
    finish(i, r);
  }

  void trace(const WorkerSlot &w, MeasureTraceEvent::Kind kind, double worker_seconds) {
    if (!pool_.options.trace) return;
    MeasureTraceEvent e;
    e.kind = kind;
    e.position = w.item;
    e.worker = w.index;
    e.start = steady_seconds(w.sent);
    e.end = steady_seconds(Clock::now());
    e.worker_seconds = worker_seconds;
    pool_.options.trace(e);
  }

  // --- workers ---

  // Starts the slot's process if it has none; "" or why it could not.
  std::string ensure_started(WorkerSlot &w) {
    if (w.process.running()) return "";
    WorkerSpawnOptions spawn;
    spawn.argv = pool_.options.worker_command;
    spawn.memory_limit_bytes =
        worker_address_space_limited(pool_.options.target) ? pool_.options.memory_limit_bytes : 0;
    w.ready = false;
    std::string error = w.process.spawn(spawn);
    if (error.empty()) {
      ++pool_.started;
      if (w.spawned) ++pool_.restarted;
      w.spawned = true;
    }
    return error;
  }

  // The deadline of a request of `timeout_ms` started now; a worker still starting gets longer.
  Clock::time_point deadline_for(const WorkerSlot &w, uint32_t timeout_ms) const {
    return Clock::now() + std::chrono::milliseconds(timeout_ms + (w.ready ? 0 : kStartupGraceMs));
  }

  // Sends a request about item i; false (and the worker is written off) when it cannot be sent.
  bool send(WorkerSlot &w, size_t i, const v1::WorkerRequest &req, WorkerSlot::Doing doing, uint32_t timeout_ms) {
    if (std::string error = ensure_started(w); !error.empty()) {
      finish_error(i, v1::INFRA, "cannot start a measurement worker: " + error);
      return false;
    }
    w.doing = doing;
    w.item = i;
    w.sent = Clock::now();
    w.deadline = deadline_for(w, timeout_ms);
    w.reference_phase = doing == WorkerSlot::Doing::Build && check_;
    if (w.process.send(req)) return true;
    // The worker was gone before it got the request: not the candidate's fault.
    w.doing = WorkerSlot::Doing::Nothing;
    lost(w, w.process.reap_after_exit(), "");
    return false;
  }

  void start_build(WorkerSlot &w, size_t i) {
    Item &item = items_[i];
    item.id = pool_.next_id++;
    item.worker = w.index;
    v1::WorkerRequest req;
    auto *b = req.mutable_build();
    b->set_candidate_id(item.id);
    *b->mutable_workload() = batch_[i].workload;
    b->set_target(pool_.target.str());
    *b->mutable_config() = batch_[i].config;
    b->set_check_correctness(check_);
    b->set_build_timeout_ms(options_.build_timeout_ms());
    item.state = Item::State::Building;
    if (!send(w, i, req, WorkerSlot::Doing::Build, options_.build_timeout_ms()) &&
        item.state == Item::State::Building) {
      requeue(i);
    }
  }

  void start_run(WorkerSlot &w, size_t i) {
    Item &item = items_[i];
    v1::WorkerRequest req;
    auto *r = req.mutable_run();
    r->set_candidate_id(item.id);
    *r->mutable_options() = options_;
    item.state = Item::State::Running;
    if (!send(w, i, req, WorkerSlot::Doing::Run, options_.run_timeout_ms()) && item.state == Item::State::Running) {
      requeue(i);
    }
  }

  // Item i goes back to be built again (its worker was lost without its fault).
  void requeue(size_t i) {
    Item &item = items_[i];
    if (++item.losses > kMaxLosses) {
      finish_error(i, v1::INFRA, "the measurement workers holding this candidate were lost repeatedly");
      return;
    }
    item.state = Item::State::Pending;
    item.worker = -1;
  }

  static bool ended_on_its_own(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

  // The worker's process ended (status from waitpid); `why` is set when the runner killed it.
  // The candidate it was working on is blamed, those it had built are built again elsewhere.
  void lost(WorkerSlot &w, int status, const std::string &why) {
    if (w.doing != WorkerSlot::Doing::Nothing) {
      const size_t i = w.item;
      const bool building = w.doing == WorkerSlot::Doing::Build;
      trace(w, building ? MeasureTraceEvent::Build : MeasureTraceEvent::Run, 0);
      const std::string how = describe_wait_status(status);
      if (!why.empty()) {
        finish_error(i, building ? v1::BUILD_TIMEOUT : v1::RUN_TIMEOUT, why);
      } else if (w.ready && ended_on_its_own(status)) {
        // A worker exits with status 0 only on its own, after its last reply, when its device was
        // left unusable (a GPU context after an illegal address); the request sent meanwhile never
        // ran, so the candidate goes to a fresh worker rather than being blamed.
        requeue(i);
      } else if (!w.ready) {
        finish_error(i, v1::INFRA, "the measurement worker " + how + " before it started");
      } else if (building) {
        finish_error(i, v1::COMPILE_HOST, "the measurement worker was " + how + " while compiling the candidate");
      } else {
        finish_error(i, v1::RUNTIME_DEVICE, "the measurement worker was " + how + " while running the candidate");
      }
      w.doing = WorkerSlot::Doing::Nothing;
    }
    w.ready = false;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].state == Item::State::Built && items_[i].worker == w.index) requeue(i);
    }
  }

  void on_reply(WorkerSlot &w, const v1::WorkerReply &reply) {
    if (reply.has_ready()) {
      w.ready = true;
      if (w.doing != WorkerSlot::Doing::Nothing) {
        w.deadline = deadline_for(
            w, w.doing == WorkerSlot::Doing::Build ? options_.build_timeout_ms() : options_.run_timeout_ms());
      }
      return;
    }
    if (w.doing == WorkerSlot::Doing::Nothing) return;
    Item &item = items_[w.item];
    if (reply.has_reference_done()) {
      if (reply.reference_done().candidate_id() == item.id) {
        // The reference is computed once per workload; compiling the candidate gets its own time.
        w.reference_phase = false;
        w.deadline = deadline_for(w, options_.build_timeout_ms());
      }
      return;
    }
    if (!reply.has_result() || reply.result().candidate_id() != item.id) return;
    const v1::WorkerResult &r = reply.result();
    const size_t i = w.item;
    if (w.doing == WorkerSlot::Doing::Build) {
      trace(w, MeasureTraceEvent::Build, r.busy_seconds());
      w.doing = WorkerSlot::Doing::Nothing;
      item.compile_seconds = r.result().compile_seconds();
      if (r.result().error() == v1::OK) {
        item.state = Item::State::Built;
      } else {
        finish(i, r.result());
      }
    } else {
      trace(w, MeasureTraceEvent::Run, r.busy_seconds());
      w.doing = WorkerSlot::Doing::Nothing;
      finish(i, r.result());
    }
  }

  // Waits for replies (or timeouts) of the workers with a request in progress.
  void wait_events() {
    std::vector<WorkerSlot *> busy;
    std::vector<struct pollfd> fds;
    auto now = Clock::now();
    auto next_deadline = Clock::time_point::max();
    for (auto &w : pool_.workers) {
      if (w->doing == WorkerSlot::Doing::Nothing) continue;
      busy.push_back(w.get());
      fds.push_back({w->process.fd(), POLLIN, 0});
      next_deadline = std::min(next_deadline, w->deadline);
    }
    if (busy.empty()) return;
    int64_t wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now).count() + 1;
    wait_ms = std::max<int64_t>(0, std::min<int64_t>(wait_ms, cancel_ ? 20 : 1000));
    ::poll(fds.data(), fds.size(), static_cast<int>(wait_ms));
    for (size_t k = 0; k < busy.size(); ++k) {
      WorkerSlot &w = *busy[k];
      if (fds[k].revents == 0) continue;
      const bool open = w.process.read_available();
      std::string payload;
      while (w.process.next_frame(&payload)) {
        v1::WorkerReply reply;
        if (reply.ParseFromString(payload)) on_reply(w, reply);
      }
      if (w.process.corrupt()) {
        lost(w, w.process.kill_and_reap(), "");
      } else if (!open) {
        lost(w, w.process.reap_after_exit(), "");
      }
    }
    if (cancelled()) {
      // Nobody waits for these results any more: free the device now rather than at the end of
      // the build or run in progress (which may take up to its timeout).
      for (WorkerSlot *w : busy) {
        if (w->doing == WorkerSlot::Doing::Nothing) continue;
        const size_t i = w->item;
        w->doing = WorkerSlot::Doing::Nothing;
        lost(*w, w->process.kill_and_reap(), "");
        finish_error(i, v1::INFRA, "cancelled");
      }
      return;
    }
    now = Clock::now();
    for (WorkerSlot *w : busy) {
      if (w->doing == WorkerSlot::Doing::Nothing || now < w->deadline) continue;
      std::string why;
      if (!w->ready) {
        // Not the candidate's fault: the worker never came up.
        const size_t i = w->item;
        const bool building = w->doing == WorkerSlot::Doing::Build;
        w->doing = WorkerSlot::Doing::Nothing;
        lost(*w, w->process.kill_and_reap(), "");
        if (building ? items_[i].state == Item::State::Building : items_[i].state == Item::State::Running) {
          finish_error(i, v1::INFRA, "the measurement worker did not start in time");
        }
        continue;
      }
      if (w->doing == WorkerSlot::Doing::Build) {
        why = std::string(w->reference_phase ? "computing the reference output" : "compiling") +
              " took longer than the build timeout of " + std::to_string(options_.build_timeout_ms()) + " ms";
      } else {
        why = "running took longer than the run timeout of " + std::to_string(options_.run_timeout_ms()) + " ms";
      }
      lost(*w, w->process.kill_and_reap(), why);
    }
  }

  // --- rounds ---

  // Gives every worker up to kBuildsPerWorker pending candidates and builds them all.
  void build_round() {
    std::vector<size_t> pending;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].state == Item::State::Pending) pending.push_back(i);
    }
    const size_t n = pool_.workers.size();
    const size_t take = std::min(pending.size(), n * kBuildsPerWorker);
    for (size_t k = 0; k < take; ++k) {
      items_[pending[k]].state = Item::State::Queued;
      pool_.workers[k % n]->queue.push_back(pending[k]);
    }
    for (;;) {
      if (cancelled()) {
        for (auto &w : pool_.workers) {
          for (size_t i : w->queue) finish_error(i, v1::INFRA, "cancelled");
          w->queue.clear();
        }
      }
      bool busy = false;
      for (auto &w : pool_.workers) {
        while (w->doing == WorkerSlot::Doing::Nothing && !w->queue.empty()) {
          const size_t i = w->queue.front();
          w->queue.pop_front();
          start_build(*w, i);
        }
        busy = busy || w->doing != WorkerSlot::Doing::Nothing || !w->queue.empty();
      }
      if (!busy) break;
      wait_events();
    }
  }

  // Runs the built candidates one at a time, in batch order.
  void run_round() {
    std::vector<size_t> built;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].state == Item::State::Built) built.push_back(i);
    }
    for (size_t i : built) {
      if (items_[i].state != Item::State::Built) continue;  // its worker was lost meanwhile
      if (cancelled()) {
        finish_error(i, v1::INFRA, "cancelled");
        continue;
      }
      if (ran_any_ && options_.cooldown_ms() > 0) {
        const auto until = Clock::now() + std::chrono::milliseconds(options_.cooldown_ms());
        while (Clock::now() < until && !cancelled()) {
          std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
        }
        if (cancelled()) {
          finish_error(i, v1::INFRA, "cancelled");
          continue;
        }
      }
      WorkerSlot &w = *pool_.workers[static_cast<size_t>(items_[i].worker)];
      start_run(w, i);
      while (w.doing == WorkerSlot::Doing::Run) wait_events();
      ran_any_ = true;
    }
  }

  void forget_built() {
    v1::WorkerRequest req;
    req.mutable_forget();
    for (auto &w : pool_.workers) {
      if (w->process.running()) w->process.send(req, 1000);
    }
  }

  PoolState &pool_;
  const std::vector<Candidate> &batch_;
  const v1::MeasureOptions &options_;
  const std::function<void(size_t, const MeasureResult &)> &on_result_;
  const std::atomic<bool> *cancel_;
  std::vector<Item> items_;
  const bool check_;
  size_t done_ = 0;
  bool cancel_seen_ = false;
  bool ran_any_ = false;
};

// --- checking requests ---

std::optional<MeasureRejection> PoolState::check_workload(const v1::Workload &w) {
  const std::string id = w.template_name() + "\n" + w.args_json() + "\n" + w.key();
  for (auto it = checked.begin(); it != checked.end(); ++it) {
    if (it->first == id) {
      checked.splice(checked.begin(), checked, it);
      return it->second;
    }
  }
  auto problem = [&]() -> std::optional<MeasureRejection> {
    contracts::Json args;
    try {
      args = contracts::Json::parse(w.args_json());
    } catch (const contracts::JsonError &e) {
      return MeasureRejection("the arguments of workload " + w.template_name() + " are not valid JSON: " + e.what());
    }
    try {
      ops::Task task(w.template_name(), args, target, registry);
      if (!w.key().empty() && w.key() != task.key()) {
        return MeasureRejection("the key of workload " + w.template_name() + " (" + w.key() +
                                ") does not match its template and arguments (" + task.key() + ")");
      }
      ops::Compute c = task.compute(task.default_config());
      double bytes = 0;
      for (const auto &t : c.args()) {
        double n = static_cast<double>(t.dtype().bytes()) * t.dtype().lanes();
        for (const auto &d : t.shape()) n *= static_cast<double>(ir::as_const_int(d).value_or(1));
        bytes += n;
      }
      if (bytes > static_cast<double>(limits().max_tensor_bytes)) {
        std::ostringstream os;
        os << "the tensors of workload " << w.template_name() << " take " << bytes
           << " bytes, above the runner's limit of " << limits().max_tensor_bytes;
        return MeasureRejection(os.str(), MeasureRejection::Reason::kOverLimit);
      }
    } catch (const std::exception &e) {
      return MeasureRejection("workload " + w.template_name() + ": " + e.what());
    }
    return std::nullopt;
  }();
  checked.emplace_front(id, problem);
  if (checked.size() > kCheckedWorkloads) checked.pop_back();
  return problem;
}

std::optional<MeasureRejection> PoolState::check_batch(const std::vector<Candidate> &batch,
                                                       const v1::MeasureOptions &o) {
  const MeasureLimits &l = limits();
  if (auto p = check_options(o, l)) return p;
  if (batch.size() > l.max_batch) {
    return MeasureRejection("the batch has " + std::to_string(batch.size()) + " configs, above the runner's limit of " +
                                std::to_string(l.max_batch),
                            MeasureRejection::Reason::kOverLimit);
  }
  auto too_long = [&](const std::string &what, size_t i, const std::string &s) -> std::optional<MeasureRejection> {
    if (s.size() <= l.max_json_bytes) return std::nullopt;
    return MeasureRejection(what + " of config " + std::to_string(i) + " is " + std::to_string(s.size()) +
                                " bytes long, above the runner's limit of " + std::to_string(l.max_json_bytes),
                            MeasureRejection::Reason::kOverLimit);
  };
  // "-mcpu=native" is this runner's CPU: candidates name the runner's target in any spelling.
  std::string last_text, last_concrete;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Candidate &c = batch[i];
    std::string config_target;
    try {
      if (i == 0 || c.target.target() != last_text) {
        last_concrete = driver::concrete_target(c.target.target());
        last_text = c.target.target();
      }
      config_target = last_concrete;
    } catch (const UserError &e) {
      return "config " + std::to_string(i) + ": " + e.what();
    }
    if (config_target != target.str()) {
      return "config " + std::to_string(i) + " is for target '" + c.target.target() +
             "', but this runner compiles for '" + target.str() + "'";
    }
    for (const std::optional<MeasureRejection> &p :
         {too_long("the template name", i, c.workload.template_name()),
          too_long("args_json", i, c.workload.args_json()), too_long("the workload key", i, c.workload.key()),
          too_long("knobs_json", i, c.config.knobs_json()),
          too_long("the space fingerprint", i, c.config.space_fingerprint())}) {
      if (p) return p;
    }
    if (auto p = check_workload(c.workload)) return p;
  }
  return std::nullopt;
}

}  // namespace

// --- MeasurePool ---

struct MeasurePool::Impl {
  explicit Impl(MeasurePoolOptions o) : state(std::move(o)) {}
  PoolState state;
};

MeasurePool::MeasurePool(MeasurePoolOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

MeasurePool::~MeasurePool() {
  std::lock_guard<std::mutex> lock(impl_->state.mutex);
  for (auto &w : impl_->state.workers) w->process.kill_and_reap();
}

std::optional<MeasureRejection> MeasurePool::measure(
    const std::vector<Candidate> &batch, const v1::MeasureOptions &options,
    const std::function<void(size_t, const MeasureResult &)> &on_result, const std::atomic<bool> *cancel) {
  std::lock_guard<std::mutex> lock(impl_->state.mutex);
  if (auto rejection = impl_->state.check_batch(batch, options)) return rejection;
  if (batch.empty()) return std::nullopt;
  const v1::MeasureOptions full = with_defaults(options);
  MeasureCall call(impl_->state, batch, full, on_result, cancel);
  call.run();
  return std::nullopt;
}

int MeasurePool::workers_started() const { return impl_->state.started.load(); }

int MeasurePool::worker_restarts() const { return impl_->state.restarted.load(); }

}  // namespace kiln::rpc
