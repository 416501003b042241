#pragma once
// Progress: one line on stderr that a long import or export keeps up to date ("importing: 120000
// records, 95000/s"), redrawn at most once a second and only when stderr is a terminal, so that
// scripts and logs never see it. The line is cleared when the work ends.
#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::cli {

class Progress {
 public:
  // `verb` starts the line ("importing"). Shown when stderr is a terminal.
  explicit Progress(std::string verb);
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;
  ~Progress();

  // `done` records so far; redraws the line when a second has passed since the last time.
  void update(int64_t done);
  // Clears the line, before the command prints its result; the destructor does it too.
  void finish();

 private:
  std::string verb_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace kiln::cli
