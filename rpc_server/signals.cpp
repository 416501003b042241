#include "rpc_server/signals.h"

#include <signal.h>

#include <cstdio>
#include <fstream>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void block_shutdown_signals() {
  sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int wait_for_shutdown_signal() {
  sigset_t set = shutdown_signals();
  int received = 0;
  while (sigwait(&set, &received) != 0) {
  }
  return received;
}

void write_file_atomically(const std::string &path, const std::string &text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out.flush()) throw UserError("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw UserError("cannot rename " + temporary + " to " + path);
  }
}

}  // namespace kiln::rpc
