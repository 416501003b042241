#include "rpc_server/worker_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace kiln::rpc {

namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string frame_of(const google::protobuf::MessageLite &message) {
  const size_t size = message.ByteSizeLong();
  std::string frame(4 + size, '\0');
  for (int i = 0; i < 4; ++i) frame[static_cast<size_t>(i)] = static_cast<char>((size >> (8 * i)) & 0xff);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t *>(&frame[4]));
  return frame;
}

uint32_t frame_length(const char *p) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return n;
}

bool read_exactly(int fd, char *p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Only async-signal-safe calls from here on: this runs in the child between fork and exec.
[[noreturn]] void exec_child(char *const *argv, int channel, int error_pipe, uint64_t memory_limit) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (memory_limit > 0) {
    struct rlimit as = {static_cast<rlim_t>(memory_limit), static_cast<rlim_t>(memory_limit)};
    setrlimit(RLIMIT_AS, &as);
  }
  // Move both descriptors out of the way before the channel takes its fixed number.
  int err = fcntl(error_pipe, F_DUPFD_CLOEXEC, kWorkerChannelFd + 1);
  int ch = fcntl(channel, F_DUPFD_CLOEXEC, kWorkerChannelFd + 1);
  if (err < 0 || ch < 0 || dup2(ch, kWorkerChannelFd) < 0) {
    int e = errno;
    if (err >= 0) (void)!::write(err, &e, sizeof e);
    _exit(127);
  }
  execvp(argv[0], argv);
  int e = errno;
  (void)!::write(err, &e, sizeof e);
  _exit(127);
}

}  // namespace

WorkerProcess::~WorkerProcess() { kill_and_reap(); }

std::string WorkerProcess::spawn(const WorkerSpawnOptions &options) {
  kill_and_reap();
  if (options.argv.empty() || options.argv[0].empty()) return "the worker command is empty";
  // Everything the child needs is allocated before fork.
  std::vector<std::string> args = options.argv;
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return std::string("cannot create the worker's socket: ") + std::strerror(errno);
  }
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return std::string("cannot create a pipe: ") + std::strerror(e);
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {sv[0], sv[1], ep[0], ep[1]}) ::close(fd);
    return std::string("cannot fork a worker: ") + std::strerror(e);
  }
  if (pid == 0) exec_child(argv.data(), sv[1], ep[1], options.memory_limit_bytes);

  ::close(sv[1]);
  ::close(ep[1]);
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(ep[0], &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  ::close(ep[0]);
  if (got == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(sv[0]);
    return "cannot execute the worker " + options.argv[0] + ": " + std::strerror(child_errno);
  }
  pid_ = pid;
  fd_ = sv[0];
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  inbox_.clear();
  corrupt_ = false;
  return "";
}

bool WorkerProcess::send(const google::protobuf::MessageLite &message, int timeout_ms) {
  if (fd_ < 0) return false;
  const std::string frame = frame_of(message);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      struct pollfd p = {fd_, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left));
      continue;
    }
    return false;
  }
  return true;
}

bool WorkerProcess::read_available() {
  if (fd_ < 0) return false;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      inbox_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

bool WorkerProcess::next_frame(std::string *payload) {
  if (inbox_.size() < 4) return false;
  const uint32_t n = frame_length(inbox_.data());
  if (n > kMaxFrameBytes) {
    corrupt_ = true;
    return false;
  }
  if (inbox_.size() < 4 + static_cast<size_t>(n)) return false;
  payload->assign(inbox_, 4, n);
  inbox_.erase(0, 4 + static_cast<size_t>(n));
  return true;
}

void WorkerProcess::close_channel() {
  close_fd(fd_);
  inbox_.clear();
}

int WorkerProcess::kill_and_reap() {
  close_channel();
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

int WorkerProcess::reap_after_exit(int grace_ms) {
  close_channel();
  if (pid_ <= 0) return -1;
  const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return status;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return -1;
    }
    if (Clock::now() >= deadline) return kill_and_reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool read_frame(int fd, std::string *payload) {
  char head[4];
  if (!read_exactly(fd, head, 4)) return false;
  const uint32_t n = frame_length(head);
  if (n > kMaxFrameBytes) return false;
  payload->resize(n);
  return n == 0 || read_exactly(fd, &(*payload)[0], n);
}

bool write_frame(int fd, const google::protobuf::MessageLite &message) {
  const std::string frame = frame_of(message);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string signal_description(int sig) {
  static const struct {
    int sig;
    const char *name;
  } kNames[] = {{SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
                {SIGPIPE, "SIGPIPE"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGXCPU, "SIGXCPU"},
                {SIGXFSZ, "SIGXFSZ"}, {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}};
  std::string name = "signal " + std::to_string(sig);
  for (const auto &n : kNames) {
    if (n.sig == sig) name = n.name;
  }
  const char *what = ::strsignal(sig);
  return what ? name + " (" + what + ")" : name;
}

std::string describe_wait_status(int status) {
  if (status < 0) return "ended (its status is unknown)";
  if (WIFSIGNALED(status)) return "killed by signal " + signal_description(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

}  // namespace kiln::rpc
