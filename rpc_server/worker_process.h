#pragma once
// Worker processes of the measurement pool and the channel to them: spawning a worker with
// fork+exec (never fork alone: the runner is multithreaded), its resource limits, framing
// protobuf messages over the socket that joins the two, reaping it, and naming how it died.
//
// The channel is a local stream socket pair; the worker finds its end on file descriptor 3. A
// frame is a 4-byte little-endian length then that many bytes of a serialized message.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/message_lite.h>

namespace kiln::rpc {

// The descriptor a worker's end of the channel has.
constexpr int kWorkerChannelFd = 3;
// Frames longer than this are refused as corrupt.
constexpr uint32_t kMaxFrameBytes = 256u << 20;

struct WorkerSpawnOptions {
  std::vector<std::string> argv;    // argv[0] is the program
  uint64_t memory_limit_bytes = 0;  // RLIMIT_AS; 0: unlimited
};

// A running child process with the runner's end of its channel (non-blocking, close-on-exec).
class WorkerProcess {
 public:
  WorkerProcess() = default;
  ~WorkerProcess();  // kill_and_reap()
  WorkerProcess(const WorkerProcess &) = delete;
  WorkerProcess &operator=(const WorkerProcess &) = delete;

  // Starts the process; returns "" or why it could not be started (the program cannot be
  // executed, no descriptors left, ...). Core dumps are off in the child.
  std::string spawn(const WorkerSpawnOptions &options);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }

  // Sends one frame, waiting at most timeout_ms for the socket to take it. False when the
  // worker is gone or does not read.
  bool send(const google::protobuf::MessageLite &message, int timeout_ms = 5000);
  // Reads what the socket holds without blocking. False at end of stream or on an error.
  bool read_available();
  // Takes the next complete frame into `payload`; false when there is none yet.
  bool next_frame(std::string *payload);
  // Whether the worker sent a frame longer than kMaxFrameBytes.
  bool corrupt() const { return corrupt_; }

  // SIGKILL (if still running), then waits for it. Returns the wait status, or -1 if there was
  // no process.
  int kill_and_reap();
  // After end of stream: waits up to grace_ms for the process to end on its own, then kills it.
  // Returns the wait status.
  int reap_after_exit(int grace_ms = 2000);

 private:
  void close_channel();

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string inbox_;
  bool corrupt_ = false;
};

// The blocking side a worker uses on its end of the channel.
bool read_frame(int fd, std::string *payload);  // false at end of stream or on an error
bool write_frame(int fd, const google::protobuf::MessageLite &message);

// "SIGSEGV (Segmentation fault)".
std::string signal_description(int sig);
// "killed by signal SIGSEGV (Segmentation fault)", "exited with status 3", ...
std::string describe_wait_status(int status);

}  // namespace kiln::rpc
