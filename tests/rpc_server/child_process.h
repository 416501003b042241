#pragma once
// ChildProcess: a program started for a test (a tracker, a runner, the kiln command), its
// output captured in a file, killed and reaped when the object goes away.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace kiln::testing {

class ChildProcess {
 public:
  // Starts argv[0] with `argv`, stdout and stderr going to `log_path`.
  ChildProcess(const std::vector<std::string> &argv, const std::string &log_path) : log_path_(log_path) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  }
  ~ChildProcess() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      wait_for(std::chrono::seconds(10));
    }
  }
  ChildProcess(const ChildProcess &) = delete;
  ChildProcess &operator=(const ChildProcess &) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // The wait status once the process has exited within `timeout`, else nullopt.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    if (exited_) return status_;
    auto until = std::chrono::steady_clock::now() + timeout;
    do {
      int status = 0;
      pid_t got = waitpid(pid_, &status, WNOHANG);
      if (got == pid_) {
        exited_ = true;
        status_ = status;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (std::chrono::steady_clock::now() < until);
    return std::nullopt;
  }
  bool running() {
    if (exited_) return false;
    return !wait_for(std::chrono::milliseconds(0)).has_value();
  }
  std::string log() const {
    std::ifstream in(log_path_);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Runs `argv` to completion; returns (exit code, output).
inline std::pair<int, std::string> run_command(const std::vector<std::string> &argv, const std::string &log_path,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  { std::ofstream truncate(log_path, std::ios::trunc); }
  ChildProcess child(argv, log_path);
  std::optional<int> status = child.wait_for(timeout);
  if (!status) return {-1, child.log() + "\n(timed out)"};
  int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  return {code, child.log()};
}

}  // namespace kiln::testing
