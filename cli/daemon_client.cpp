#include "cli/daemon_client.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "contracts/error.h"
#include "rpc_server/shared_token.h"
#include "rpc_server/signals.h"
#include "tuner/job_wire.h"

namespace kiln::cli {

namespace {

// A unary call may build a thousand tasks before it answers.
constexpr std::chrono::seconds kCallTimeout{120};

}  // namespace

void add_daemon_options(CLI::App *command, DaemonOptions &options) {
  const std::string group = "Tuning service";
  command->add_option("--daemon", options.address, "the tuning service (kilnd) to use, HOST:PORT")->group(group);
  command
      ->add_option(
          "--token-file", options.token_file,
          std::string("file holding the service's shared token (default: $") + rpc::kTokenEnvironmentVariable + ")")
      ->group(group);
  command->add_option("--tls-ca", options.tls.ca_file, "PEM CA certificates that sign the service's")->group(group);
  command->add_option("--tls-cert", options.tls.cert_file, "PEM client certificate (mutual TLS)")->group(group);
  command->add_option("--tls-key", options.tls.key_file, "PEM private key of --tls-cert")->group(group);
  command
      ->add_option("--tls-server-name", options.tls.server_name_override,
                   "the name to expect in the service's certificate")
      ->group(group);
}

TunerClient::TunerClient(const DaemonOptions &options)
    : address_(options.address),
      token_(rpc::load_token(options.token_file)),
      stub_(kiln::v1::Tuner::NewStub(rpc::make_channel(options.address, options.tls))) {}

void TunerClient::prepare(grpc::ClientContext &context, bool deadline) const {
  rpc::attach_token(context, token_);
  if (deadline) context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

void TunerClient::fail(const grpc::Status &status) const {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      throw UserError("the tuning service at " + address_ + " cannot be reached: " + status.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      throw UserError("the tuning service at " + address_ + " refused the token (" + status.error_message() +
                      "); give its token with --token-file or $" + rpc::kTokenEnvironmentVariable);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw UserError("the tuning service at " + address_ + " did not answer in time");
    default:
      throw UserError(status.error_message());
  }
}

tuner::JobReport TunerClient::submit(const tuner::JobSubmission &submission) {
  kiln::v1::SubmitJobRequest request;
  *request.mutable_spec() = tuner::submission_to_proto(submission);
  kiln::v1::SubmitJobReply reply;
  grpc::ClientContext context;
  prepare(context);
  const grpc::Status status = stub_->SubmitJob(&context, request, &reply);
  if (!status.ok()) fail(status);
  return tuner::report_from_proto(reply.job());
}

tuner::JobReport TunerClient::job_call(Call call, int64_t job) {
  kiln::v1::JobRequest request;
  request.set_job_id(job);
  kiln::v1::JobInfo reply;
  grpc::ClientContext context;
  prepare(context);
  const grpc::Status status = ((*stub_).*call)(&context, request, &reply);
  if (!status.ok()) fail(status);
  return tuner::report_from_proto(reply);
}

tuner::JobReport TunerClient::get(int64_t job) { return job_call(&kiln::v1::Tuner::Stub::GetJob, job); }
tuner::JobReport TunerClient::pause(int64_t job) { return job_call(&kiln::v1::Tuner::Stub::PauseJob, job); }
tuner::JobReport TunerClient::resume(int64_t job) { return job_call(&kiln::v1::Tuner::Stub::ResumeJob, job); }
tuner::JobReport TunerClient::cancel(int64_t job) { return job_call(&kiln::v1::Tuner::Stub::CancelJob, job); }

std::vector<tuner::JobReport> TunerClient::list() {
  kiln::v1::ListJobsReply reply;
  grpc::ClientContext context;
  prepare(context);
  const grpc::Status status = stub_->ListJobs(&context, kiln::v1::ListJobsRequest(), &reply);
  if (!status.ok()) fail(status);
  std::vector<tuner::JobReport> out;
  for (const kiln::v1::JobInfo &info : reply.jobs()) out.push_back(tuner::report_from_proto(info));
  return out;
}

std::optional<tuner::JobReport> TunerClient::watch(
    int64_t job, const std::function<void(const tuner::JobReport &, bool final)> &on_event) {
  kiln::v1::JobRequest request;
  request.set_job_id(job);
  grpc::ClientContext context;
  prepare(context, /*deadline=*/false);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return std::nullopt;
    watching_ = &context;
  }
  std::unique_ptr<grpc::ClientReader<kiln::v1::JobEvent>> reader = stub_->WatchJob(&context, request);
  std::optional<tuner::JobReport> last;
  kiln::v1::JobEvent event;
  while (reader->Read(&event)) {
    tuner::JobReport report = tuner::report_from_proto(event.job());
    on_event(report, event.final());
    if (event.final()) last = std::move(report);
  }
  const grpc::Status status = reader->Finish();
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watching_ = nullptr;
    stopped = stopped_;
  }
  if (last) return last;
  if (stopped) return std::nullopt;
  if (!status.ok()) fail(status);
  throw UserError("the tuning service at " + address_ + " ended the watch of job " + std::to_string(job) +
                  " without its final state");
}

void TunerClient::stop_watching() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  if (watching_) watching_->TryCancel();
}

std::optional<tuner::JobReport> follow_job(TunerClient &client, int64_t job, LiveView &view) {
  std::atomic<bool> finished{false};
  std::thread waiter([&] {
    rpc::wait_for_shutdown_signal();
    if (!finished) client.stop_watching();
  });
  std::optional<tuner::JobReport> end;
  try {
    end = client.watch(job, [&](const tuner::JobReport &report, bool final) { view.update(report.status, final); });
  } catch (...) {
    finished = true;
    kill(getpid(), SIGTERM);
    waiter.join();
    throw;
  }
  finished = true;
  kill(getpid(), SIGTERM);  // wakes the waiter, whose signal this is when nobody pressed Ctrl-C
  waiter.join();
  return end;
}

}  // namespace kiln::cli
