#include "cli/job_view.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/table.h"

namespace kiln::cli {

std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "-";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

LiveView::LiveView(std::ostream &out, bool json) : out_(out), json_(json), tty_(!json && isatty(STDOUT_FILENO)) {}

void LiveView::update(const tuner::JobStatus &s, bool final) {
  if (json_) {
    nlohmann::ordered_json e = {{"event", final ? "end" : "progress"},
                                {"job", s.job_id},
                                {"state", s.state},
                                {"trials_done", s.trials_done},
                                {"trials_total", s.trials_total},
                                {"elapsed_s", s.elapsed_s},
                                {"eta_s", s.eta_s}};
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const tuner::TaskStatus &t : s.tasks) {
      tasks.push_back({{"name", t.name},
                       {"workload", t.workload_key},
                       {"trials", t.trials},
                       {"valid", t.valid},
                       {"best_s", t.best_s ? nlohmann::json(*t.best_s) : nlohmann::json()},
                       {"default_s", t.default_s ? nlohmann::json(*t.default_s) : nlohmann::json()},
                       {"best_gflops", t.best_gflops()},
                       {"speedup", t.speedup()},
                       {"done", t.done},
                       {"errors", t.errors}});
    }
    e["tasks"] = tasks;
    out_ << e.dump() << "\n" << std::flush;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  // A job that waits or is queued (in the tuning service) says so once per change.
  const bool news = s.state != "running" && (s.state != last_state_ || s.message != last_message_);
  last_state_ = s.state;
  last_message_ = s.message;
  if (!tty_) {
    if (news && !final) {
      out_ << fmt::format("job {} {}{}{}\n", s.job_id, s.state, s.message.empty() ? "" : ": ", s.message) << std::flush;
    }
    // One line per batch: the job and the task that moved.
    const tuner::TaskStatus *moved = nullptr;
    for (size_t i = 0; i < s.tasks.size(); ++i) {
      if (s.tasks[i].trials != (i < last_trials_.size() ? last_trials_[i] : 0)) moved = &s.tasks[i];
    }
    last_trials_.clear();
    for (const tuner::TaskStatus &t : s.tasks) last_trials_.push_back(t.trials);
    if (moved && !final) {
      out_ << fmt::format("trial {}/{}  {}: {} trials, best {:.1f} GFLOPS ({:.2f}x the default)  eta {}\n",
                          s.trials_done, s.trials_total, moved->name, moved->trials, moved->best_gflops(),
                          moved->speedup(), duration(s.eta_s))
           << std::flush;
    }
    return;
  }
  if (!final && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  std::string text;
  text +=
      fmt::format("job {}  {}/{} trials  {} elapsed  eta {}{}\n", s.job_id, s.trials_done, s.trials_total,
                  duration(s.elapsed_s), duration(s.eta_s),
                  s.state == "running" || final ? "" : "  " + s.state + (s.message.empty() ? "" : ": " + s.message));
  size_t width = 8;
  for (const tuner::TaskStatus &t : s.tasks) width = std::max(width, t.name.size());
  const int64_t per_task = std::max<int64_t>(1, s.trials_total / std::max<int64_t>(1, s.tasks.size()));
  for (const tuner::TaskStatus &t : s.tasks) {
    const int filled = static_cast<int>(std::min<int64_t>(20, t.trials * 20 / per_task));
    text +=
        fmt::format("  {:<{}} [{}{}] {:5} trials {:8.1f} GFLOPS {:6.2f}x  {}\n", t.name, width,
                    std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(20 - filled), '.'),
                    t.trials, t.best_gflops(), t.speedup(), t.done);
  }
  // Back over the previous drawing, then draw again.
  if (lines_ > 0) out_ << "\x1b[" << lines_ << "A";
  std::istringstream in(text);
  std::string line;
  lines_ = 0;
  while (std::getline(in, line)) {
    out_ << "\x1b[2K" << line << "\n";
    ++lines_;
  }
  out_ << std::flush;
}

void print_summary(std::ostream &out, const tuner::JobStatus &s) {
  Table table({"task", "weight", "trials", "default ms", "best ms", "speedup", "GFLOPS", "done"});
  double total_default = 0, total_best = 0;
  bool complete = true;
  for (const tuner::TaskStatus &t : s.tasks) {
    auto ms = [](const std::optional<double> &v) { return v ? fmt::format("{:.3f}", *v * 1e3) : std::string("-"); };
    table.add_row({t.name, fmt::format("{:g}", t.weight), std::to_string(t.trials), ms(t.default_s), ms(t.best_s),
                   t.speedup() > 0 ? fmt::format("{:.2f}x", t.speedup()) : "-",
                   t.best_s ? fmt::format("{:.1f}", t.best_gflops()) : "-", t.done.empty() ? "-" : t.done});
    if (t.default_s && t.best_s) {
      total_default += t.weight * *t.default_s;
      total_best += t.weight * *t.best_s;
    } else {
      complete = false;
    }
  }
  table.print(out);
  if (total_best > 0) {
    out << fmt::format("weighted total: default {:.3f} ms, tuned {:.3f} ms, speedup {:.2f}x{}\n", total_default * 1e3,
                       total_best * 1e3, total_default / total_best,
                       complete ? "" : " (tasks without a valid default or best left out)");
  }
}

void print_end(std::ostream &out, const tuner::JobStatus &s, const std::string &resume_command) {
  if (s.state == "paused") {
    out << fmt::format("job {} paused after {} of {} trials{}{}{}; resume with: {}\n", s.job_id, s.trials_done,
                       s.trials_total, s.message.empty() ? "" : " (", s.message, s.message.empty() ? "" : ")",
                       resume_command);
  } else {
    out << fmt::format("job {} {}: {} ({} trials in {})\n", s.job_id, s.state, s.message, s.trials_done,
                       duration(s.elapsed_s));
  }
}

}  // namespace kiln::cli
