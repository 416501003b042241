#pragma once
// Starting helper processes for the multi-process tests, without a shell.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::db::testing {

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;  // the read end of the child's stdout, or -1
};

// The user an unprivileged child runs as when the test runs as root: nobody.
constexpr uid_t kUnprivilegedUser = 65534;

// Starts `program` with `args`; with `capture`, its stdout comes back through a pipe. With
// `unprivileged`, a test running as root (who may write even read-only files) runs it as nobody.
inline Child spawn(const std::string &program, const std::vector<std::string> &args, bool capture = false,
                   bool unprivileged = false) {
  int fds[2] = {-1, -1};
  if (capture && pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    if (unprivileged && geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setresgid(kUnprivilegedUser, kUnprivilegedUser, kUnprivilegedUser) != 0 ||
         setresuid(kUnprivilegedUser, kUnprivilegedUser, kUnprivilegedUser) != 0)) {
      _exit(126);
    }
    if (capture) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
    }
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(program.c_str()));
    for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  if (capture) close(fds[1]);
  return {pid, capture ? fds[0] : -1};
}

// Waits for the child; its exit status, or 128 + the signal that ended it.
inline int wait_for(const Child &child) {
  int status = 0;
  if (waitpid(child.pid, &status, 0) != child.pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// What `fd` gives until a complete first line has arrived, the writer closed it, or `timeout`
// passed; the fd stays open.
inline std::string read_first_line(int fd, std::chrono::milliseconds timeout) {
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (text.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&ready, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[256];
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// Everything left to read from `fd`; closes it.
inline std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  close(fd);
  return text;
}

// What a finished program printed and its exit status (see wait_for).
struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs `program` with `args` to the end: stdout through a pipe, stderr through a file in
// `scratch_dir` (so a long stderr cannot block the child); `unprivileged` as in spawn().
inline Run run_program(const std::string &program, const std::vector<std::string> &args, const std::string &scratch_dir,
                       bool unprivileged = false) {
  const std::string err_file = scratch_dir + "/stderr.txt";
  int err_fd = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int saved = dup(STDERR_FILENO);
  dup2(err_fd, STDERR_FILENO);  // the child inherits it
  Child child = spawn(program, args, /*capture=*/true, unprivileged);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(err_fd);
  Run run;
  run.out = read_all(child.stdout_fd);
  run.status = wait_for(child);
  std::ifstream in(err_file);
  std::stringstream err;
  err << in.rdbuf();
  run.err = err.str();
  return run;
}

}  // namespace kiln::db::testing
