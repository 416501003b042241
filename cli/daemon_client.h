#pragma once
// TunerClient: the `kiln` command's side of the tuning service (kilnd, kiln.v1.Tuner), for
// `kiln tune --daemon` and `kiln jobs --daemon`. Every failure is a kiln::UserError: the service
// cannot be reached or refused the token (both named with its address), or refused the request
// (the service's own message: the tuner's for a bad spec, "there is no tuning job 7 in ...").
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/job_view.h"
#include "kiln/v1/tuner.grpc.pb.h"
#include "rpc_server/credentials.h"
#include "tuner/job_manager.h"

namespace kiln::cli {

// How a command reaches the tuning service.
struct DaemonOptions {
  std::string address;  // HOST:PORT; empty: no daemon (the command works on the local log)
  std::string token_file;
  rpc::TlsFiles tls;
};

// --daemon, --token-file and the --tls-* options, in their own group of the command's help.
void add_daemon_options(CLI::App *command, DaemonOptions &options);

class TunerClient {
 public:
  // Reads the token (--token-file or $KILN_FARM_TOKEN). Nothing is sent until the first call.
  explicit TunerClient(const DaemonOptions &options);

  tuner::JobReport submit(const tuner::JobSubmission &submission);
  tuner::JobReport get(int64_t job);
  std::vector<tuner::JobReport> list();
  tuner::JobReport pause(int64_t job);
  tuner::JobReport resume(int64_t job);
  tuner::JobReport cancel(int64_t job);

  // Follows the job: `on_event` gets every report, the last with final = true, which watch()
  // returns. Returns nullopt when stop_watching() ended the watch first (the job goes on).
  std::optional<tuner::JobReport> watch(int64_t job,
                                        const std::function<void(const tuner::JobReport &, bool final)> &on_event);
  // Ends a watch() running on another thread; one that starts later ends at once.
  void stop_watching();

  const std::string &address() const { return address_; }

 private:
  using Call = grpc::Status (kiln::v1::Tuner::Stub::*)(grpc::ClientContext *, const kiln::v1::JobRequest &,
                                                       kiln::v1::JobInfo *);
  tuner::JobReport job_call(Call call, int64_t job);
  void prepare(grpc::ClientContext &context, bool deadline = true) const;
  [[noreturn]] void fail(const grpc::Status &status) const;

  std::string address_;
  std::string token_;
  std::unique_ptr<kiln::v1::Tuner::Stub> stub_;
  std::mutex mutex_;
  grpc::ClientContext *watching_ = nullptr;
  bool stopped_ = false;
};

// Follows `job` with `view` until it stops. SIGINT or SIGTERM (Ctrl-C) stops following instead:
// then nullopt, and the job goes on in the service. The caller must have called
// rpc::block_shutdown_signals() before any thread was started (before making the client).
std::optional<tuner::JobReport> follow_job(TunerClient &client, int64_t job, LiveView &view);

}  // namespace kiln::cli
