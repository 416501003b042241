#include "rpc_server/tracker.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "contracts/error.h"
#include "rpc_server/event_log.h"

namespace kiln::rpc {

Tracker::Tracker(TrackerOptions options) : options_(std::move(options)), random_(std::random_device{}()) {
  if (options_.token.empty()) throw UserError("tracker: the shared token is empty");
  if (options_.heartbeat_interval.count() <= 0 || options_.heartbeat_timeout.count() <= 0 ||
      options_.max_wait.count() < 0) {
    throw UserError("tracker: heartbeat interval and timeout must be positive, max wait not negative");
  }
  if (options_.lease_idle_timeout.count() <= 0 || options_.quarantine_after < 1 ||
      options_.quarantine_duration.count() < 0) {
    throw UserError(
        "tracker: the lease idle timeout must be positive, quarantine_after at least 1 and the "
        "quarantine duration not negative");
  }
  timer_ = std::thread([this] { run_timer(); });
}

Tracker::~Tracker() { shutdown(); }

std::string Tracker::new_id(const char *prefix) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%s-%016llx", prefix, static_cast<unsigned long long>(random_()));
  return buffer;
}

std::string Tracker::register_runner(RunnerRegistration registration) {
  std::vector<Completion> completions;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = runners_.begin(); it != runners_.end();) {
      auto next = std::next(it);
      if (it->second.registration.address == registration.address) drop_runner(it->first);
      it = next;
    }
    do {
      id = new_id("runner");
    } while (runners_.count(id));
    std::string key = registration.device_key;
    const Clock::time_point now = Clock::now();
    Runner runner{id, std::move(registration), now, "", now, {}, false, now};
    auto health = health_.find(runner.registration.address);
    if (health != health_.end() && health->second.quarantined_until > now) {
      runner.quarantined_until = health->second.quarantined_until;
    }
    const bool held_back = quarantined(runner, now);
    ++counts_.runners_registered;
    if (options_.events) {
      options_.events->info("runner_registered", {{"runner", id},
                                                  {"address", runner.registration.address},
                                                  {"device_key", key},
                                                  {"target", runner.registration.target}});
    }
    runners_[id] = std::move(runner);
    if (!held_back) devices_[key].free_runners.push_back(id);
    dispatch(key, completions);
  }
  wake_.notify_all();
  run(completions);
  return id;
}

std::optional<std::string> Tracker::heartbeat(const std::string &runner_id, const std::string &active_lease) {
  std::vector<Completion> completions;
  std::string lease;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = runners_.find(runner_id);
    if (it == runners_.end()) return std::nullopt;
    Runner &runner = it->second;
    const Clock::time_point now = Clock::now();
    runner.last_heartbeat = now;
    if (!active_lease.empty() && active_lease == runner.lease_id) runner.lease_used = now;
    if (runner.suspect) {
      // Alive after all: back to the free runners unless quarantined.
      runner.suspect = false;
      if (runner.lease_id.empty() && !quarantined(runner, now)) {
        devices_[runner.registration.device_key].free_runners.push_back(runner.id);
        dispatch(runner.registration.device_key, completions);
      }
    }
    lease = runner.lease_id;
  }
  run(completions);
  return lease;
}

uint64_t Tracker::acquire(const std::string &device_key, int priority, Clock::time_point deadline, AcquireDone done) {
  std::vector<Completion> completions;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_request_id_++;
    if (stopping_) {
      completions.emplace_back(std::move(done), AcquireOutcome{AcquireStatus::kShutdown, {}});
    } else {
      requests_[id] = Request{id, device_key, priority, deadline, std::move(done)};
      devices_[device_key].waiting[{-priority, id}] = id;
      deadlines_.insert({deadline, id});
      dispatch(device_key, completions);
      // A request for a key without runners is told so; one that found no free runner and is
      // already due ("take one only if free now") ends.
      refuse_without_runners(device_key, Clock::now(), completions);
      if (requests_.count(id) && deadline <= Clock::now()) {
        finish_request(id, AcquireStatus::kDeadlineExceeded, completions);
      }
    }
  }
  wake_.notify_all();
  run(completions);
  return id;
}

void Tracker::cancel(uint64_t request_id) {
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (requests_.count(request_id)) {
      finish_request(request_id, AcquireStatus::kCancelled, completions);
    }
  }
  run(completions);
}

bool Tracker::release(const std::string &lease_id, bool runner_failed) {
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto lease = leases_.find(lease_id);
    if (lease == leases_.end()) return false;
    ++counts_.leases_released;
    end_lease(runners_.at(lease->second), runner_failed, completions);
  }
  wake_.notify_all();
  run(completions);
  return true;
}

bool Tracker::lease_active(const std::string &lease_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leases_.count(lease_id) != 0;
}

void Tracker::end_lease(Runner &runner, bool failed, std::vector<Completion> &completions) {
  const Clock::time_point now = Clock::now();
  leases_.erase(runner.lease_id);
  runner.lease_id.clear();
  if (failed) {
    runner.suspect = true;
    ++runner.leases_failed;
    record_failure(runner.registration.address, now, "a lease released as failed");
  } else {
    health_[runner.registration.address].consecutive_failures = 0;
  }
  if (quarantined(runner, now)) return;
  devices_[runner.registration.device_key].free_runners.push_back(runner.id);
  dispatch(runner.registration.device_key, completions);
}

void Tracker::record_failure(const std::string &address, Clock::time_point now, const char *what) {
  Health &health = health_[address];
  if (++health.consecutive_failures < options_.quarantine_after) return;
  health.quarantine_reason = std::to_string(health.consecutive_failures) + " failure" +
                             (health.consecutive_failures == 1 ? "" : "s") + " in a row, the last " + what;
  health.consecutive_failures = 0;
  health.quarantined_until = now + options_.quarantine_duration;
  if (options_.events) {
    options_.events->warn(
        "runner_quarantined",
        {{"address", address}, {"seconds", std::chrono::duration<double>(options_.quarantine_duration).count()}});
  }
  for (auto &[id, runner] : runners_) {
    if (runner.registration.address != address) continue;
    runner.quarantined_until = health.quarantined_until;
    std::deque<std::string> &free = devices_[runner.registration.device_key].free_runners;
    free.erase(std::remove(free.begin(), free.end(), id), free.end());
  }
}

std::vector<DeviceSummary> Tracker::summary() const { return full_summary().devices; }

TrackerSummary Tracker::full_summary() const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  std::lock_guard<std::mutex> lock(mutex_);
  TrackerSummary out;
  std::map<std::string, DeviceSummary> by_key;
  const Clock::time_point now = Clock::now();
  for (const auto &[id, runner] : runners_) {
    RunnerSummary r;
    r.runner_id = id;
    r.registration = runner.registration;
    r.since_heartbeat = duration_cast<milliseconds>(now - runner.last_heartbeat);
    r.since_registered = duration_cast<milliseconds>(now - runner.registered);
    r.leases_served = runner.leases_served;
    r.leases_failed = runner.leases_failed;
    r.leases_expired = runner.leases_expired;
    auto health = health_.find(runner.registration.address);
    if (health != health_.end()) r.consecutive_failures = health->second.consecutive_failures;
    if (!runner.lease_id.empty()) {
      r.state = RunnerState::kBusy;
    } else if (runner.quarantined_until > now) {
      r.state = RunnerState::kQuarantined;
      r.quarantine_left = duration_cast<milliseconds>(runner.quarantined_until - now);
      r.quarantine_reason = health != health_.end() && !health->second.quarantine_reason.empty()
                                ? health->second.quarantine_reason
                                : "failed leases in a row";
    } else if (runner.suspect) {
      r.state = RunnerState::kQuarantined;
      r.quarantine_reason = "its last lease was released as failed; held back until its next heartbeat";
    }
    out.runners.push_back(std::move(r));
    DeviceSummary &entry = by_key[runner.registration.device_key];
    const std::string &target = runner.registration.target;
    if (std::find(entry.targets.begin(), entry.targets.end(), target) == entry.targets.end()) {
      entry.targets.insert(std::upper_bound(entry.targets.begin(), entry.targets.end(), target), target);
    }
    if (!runner.lease_id.empty()) {
      entry.busy_runners += 1;
    } else if (quarantined(runner, now)) {
      entry.quarantined_runners += 1;
    } else {
      entry.free_runners += 1;
    }
  }
  for (const auto &[id, request] : requests_) by_key[request.device_key].queue_length += 1;
  for (auto &[key, entry] : by_key) {
    entry.device_key = key;
    out.devices.push_back(entry);
  }
  std::sort(out.runners.begin(), out.runners.end(), [](const RunnerSummary &a, const RunnerSummary &b) {
    return std::tie(a.registration.device_key, a.registration.address, a.runner_id) <
           std::tie(b.registration.device_key, b.registration.address, b.runner_id);
  });
  return out;
}

TrackerCounts Tracker::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void Tracker::shutdown() {
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    while (!requests_.empty()) {
      finish_request(requests_.begin()->first, AcquireStatus::kShutdown, completions);
    }
  }
  wake_.notify_all();
  if (timer_.joinable() && timer_.get_id() != std::this_thread::get_id()) timer_.join();
  run(completions);
}

void Tracker::drop_runner(const std::string &runner_id) {
  auto it = runners_.find(runner_id);
  if (it == runners_.end()) return;
  Runner &runner = it->second;
  if (!runner.lease_id.empty()) {
    leases_.erase(runner.lease_id);
    ++counts_.leases_expired;
  }
  std::deque<std::string> &free = devices_[runner.registration.device_key].free_runners;
  free.erase(std::remove(free.begin(), free.end(), runner_id), free.end());
  runners_.erase(it);
}

void Tracker::dispatch(const std::string &device_key, std::vector<Completion> &completions) {
  DeviceQueue &queue = devices_[device_key];
  while (!queue.free_runners.empty() && !queue.waiting.empty()) {
    uint64_t request_id = queue.waiting.begin()->second;
    Runner &runner = runners_.at(queue.free_runners.front());
    queue.free_runners.pop_front();
    std::string lease_id;
    do {
      lease_id = new_id("lease");
    } while (leases_.count(lease_id));
    runner.lease_id = lease_id;
    runner.lease_used = Clock::now();
    ++runner.leases_served;
    leases_[lease_id] = runner.id;
    ++counts_.leases_granted;
    Request &request = requests_.at(request_id);
    AcquireOutcome outcome{AcquireStatus::kGranted, Lease{lease_id, runner.id, runner.registration}};
    completions.emplace_back(std::move(request.done), std::move(outcome));
    queue.waiting.erase(queue.waiting.begin());
    deadlines_.erase({request.deadline, request_id});
    requests_.erase(request_id);
  }
}

void Tracker::finish_request(uint64_t request_id, AcquireStatus status, std::vector<Completion> &out,
                             std::string message) {
  auto it = requests_.find(request_id);
  Request &request = it->second;
  devices_[request.device_key].waiting.erase({-request.priority, request_id});
  deadlines_.erase({request.deadline, request_id});
  out.emplace_back(std::move(request.done), AcquireOutcome{status, {}, std::move(message)});
  requests_.erase(it);
}

void Tracker::refuse_without_runners(const std::string &device_key, Clock::time_point now,
                                     std::vector<Completion> &completions) {
  if (now - started_ < options_.heartbeat_timeout) return;
  auto queue = devices_.find(device_key);
  if (queue == devices_.end() || queue->second.waiting.empty()) return;
  std::set<std::string> keys;
  for (const auto &[id, runner] : runners_) {
    if (runner.registration.device_key == device_key) return;
    keys.insert(runner.registration.device_key);
  }
  std::string list;
  for (const std::string &k : keys) list += (list.empty() ? "" : ", ") + k;
  const std::string message =
      "no runner is registered under device key \"" + device_key + "\" (" +
      (keys.empty() ? std::string("no runner is registered at all") : "device keys with runners: " + list) + ")";
  while (!queue->second.waiting.empty()) {
    finish_request(queue->second.waiting.begin()->second, AcquireStatus::kNoRunner, completions, message);
  }
}

void Tracker::expire(Clock::time_point now, std::vector<Completion> &completions) {
  std::vector<std::string> silent;
  for (auto &[id, runner] : runners_) {
    if (now - runner.last_heartbeat >= options_.heartbeat_timeout) {
      silent.push_back(id);
    } else if (!runner.lease_id.empty() && now - runner.lease_used >= options_.lease_idle_timeout) {
      ++counts_.leases_expired;
      ++runner.leases_expired;
      if (options_.events) options_.events->warn("lease_expired", {{"lease", runner.lease_id}, {"runner", id}});
      end_lease(runner, /*failed=*/false, completions);  // its holder has gone away
    } else if (runner.lease_id.empty() && runner.quarantined_until != Clock::time_point{} &&
               runner.quarantined_until <= now) {
      runner.quarantined_until = {};
      if (!runner.suspect) {
        devices_[runner.registration.device_key].free_runners.push_back(id);
        dispatch(runner.registration.device_key, completions);
      }
    }
  }
  for (const std::string &id : silent) {
    const RunnerRegistration &lost = runners_.at(id).registration;
    ++counts_.runners_lost;
    if (options_.events) {
      options_.events->warn("runner_lost",
                            {{"runner", id}, {"address", lost.address}, {"device_key", lost.device_key}});
    }
    record_failure(lost.address, now, "a heartbeat timeout");
    drop_runner(id);
  }
  // Requests for keys whose last runner died, or that no runner registered for by the end of the
  // start-up grace.
  std::vector<std::string> keys;
  for (const auto &[key, queue] : devices_) {
    if (!queue.waiting.empty()) keys.push_back(key);
  }
  for (const std::string &key : keys) refuse_without_runners(key, now, completions);
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    finish_request(deadlines_.begin()->second, AcquireStatus::kDeadlineExceeded, completions);
  }
}

Tracker::Clock::time_point Tracker::next_wakeup() const {
  Clock::time_point next = Clock::time_point::max();
  if (!deadlines_.empty()) next = deadlines_.begin()->first;
  // The end of the start-up grace, when waiting requests for keys without runners are refused.
  if (!requests_.empty() && Clock::now() - started_ < options_.heartbeat_timeout) {
    next = std::min(next, started_ + options_.heartbeat_timeout);
  }
  for (const auto &[id, runner] : runners_) {
    next = std::min(next, runner.last_heartbeat + options_.heartbeat_timeout);
    if (!runner.lease_id.empty()) {
      next = std::min(next, runner.lease_used + options_.lease_idle_timeout);
    } else if (runner.quarantined_until != Clock::time_point{}) {
      next = std::min(next, runner.quarantined_until);
    }
  }
  return next;
}

void Tracker::run_timer() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    Clock::time_point next = next_wakeup();
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
    if (stopping_) break;
    std::vector<Completion> completions;
    expire(Clock::now(), completions);
    if (completions.empty()) continue;
    lock.unlock();
    run(completions);
    lock.lock();
  }
}

void Tracker::run(std::vector<Completion> &completions) {
  for (auto &[done, outcome] : completions) {
    if (done) done(std::move(outcome));
  }
  completions.clear();
}

}  // namespace kiln::rpc
