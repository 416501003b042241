#pragma once
// How `kiln` shows a tuning job, the same for a job run embedded (`kiln tune`) and one followed
// in the tuning service (`kiln tune --daemon`, `kiln jobs watch`): the live view while it runs and
// the table of its tasks at the end.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tuner/tuner.h"

namespace kiln::cli {

// "42s", "3m05s", "2h10m"; "-" for a negative or non-finite number.
std::string duration(double seconds);

// What the user sees while a job runs: lines redrawn in place on a terminal, a plain line per
// batch otherwise, JSON events (one per line: "progress", then "end") with `json`.
class LiveView {
 public:
  LiveView(std::ostream &out, bool json);
  // `final`: the last update, drawn whatever the time since the previous one.
  void update(const tuner::JobStatus &status, bool final = false);

 private:
  std::ostream &out_;
  bool json_, tty_;
  int lines_ = 0;
  std::vector<int64_t> last_trials_;
  std::string last_state_, last_message_;
  std::chrono::steady_clock::time_point last_draw_{};
};

// The table of a job's tasks (weight, trials, default and best latency, speedup, GFLOPS, why each
// is done) and the weighted total.
void print_summary(std::ostream &out, const tuner::JobStatus &status);

// The line after the table: "job 3 done: trial budget spent (96 trials in 41s)", or for a paused
// job how far it got and how to go on (`resume_command`).
void print_end(std::ostream &out, const tuner::JobStatus &status, const std::string &resume_command);

}  // namespace kiln::cli
