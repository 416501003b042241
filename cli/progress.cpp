#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace kiln::cli {

Progress::Progress(std::string verb)
    : verb_(std::move(verb)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { finish(); }

void Progress::finish() {
  if (shown_) std::fputs("\r\033[K", stderr);
  shown_ = false;
}

void Progress::update(int64_t done) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  double seconds = std::chrono::duration<double>(now - start_).count();
  std::fputs(fmt::format("\r{}: {} records, {:.0f}/s\033[K", verb_, done, static_cast<double>(done) / seconds).c_str(),
             stderr);
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace kiln::cli
