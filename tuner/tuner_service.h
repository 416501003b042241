#pragma once
// TunerService: the gRPC Tuner service (kiln.v1.Tuner, proto/kiln/v1/tuner.proto) on the callback
// API, in front of a JobManager. Every call must carry the shared token (UNAUTHENTICATED
// otherwise); submissions are checked against SubmissionLimits and by the tuner itself. Errors
// become statuses in one place:
//   UnknownJobError        NOT_FOUND
//   JobStateError          FAILED_PRECONDITION
//   TuneError (the rest)   INVALID_ARGUMENT, with the tuner's message
//   ServiceStoppingError   UNAVAILABLE
//   another UserError      FAILED_PRECONDITION (the tuning log refused: busy, full, damaged)
//   anything else          INTERNAL
// WatchJob holds no thread while it waits: the manager's subscription feeds a queue, from which
// the reactor writes one event at a time (progress events not yet written are replaced by newer
// ones), and it finishes after the final event or when the client goes away.
#include <string>

#include "kiln/v1/tuner.grpc.pb.h"
#include "tuner/job_manager.h"
#include "tuner/job_wire.h"

namespace kiln::tuner {

class TunerService final : public kiln::v1::Tuner::CallbackService {
 public:
  // A job spec larger than this is refused with INVALID_ARGUMENT naming its size.
  static constexpr size_t kMaxSpecBytes = size_t{4} << 20;
  // What the server hosting the service should accept (rpc::ServiceHostOptions::max_message_bytes),
  // so that a spec up to this size reaches the check above instead of gRPC's RESOURCE_EXHAUSTED.
  static constexpr int kMaxMessageBytes = 64 << 20;

  // `manager` must outlive the service and every call it serves.
  TunerService(JobManager &manager, std::string token, SubmissionLimits limits = {});

  grpc::ServerUnaryReactor *SubmitJob(grpc::CallbackServerContext *context, const kiln::v1::SubmitJobRequest *request,
                                      kiln::v1::SubmitJobReply *reply) override;
  grpc::ServerUnaryReactor *GetJob(grpc::CallbackServerContext *context, const kiln::v1::JobRequest *request,
                                   kiln::v1::JobInfo *reply) override;
  grpc::ServerUnaryReactor *ListJobs(grpc::CallbackServerContext *context, const kiln::v1::ListJobsRequest *request,
                                     kiln::v1::ListJobsReply *reply) override;
  grpc::ServerWriteReactor<kiln::v1::JobEvent> *WatchJob(grpc::CallbackServerContext *context,
                                                         const kiln::v1::JobRequest *request) override;
  grpc::ServerUnaryReactor *PauseJob(grpc::CallbackServerContext *context, const kiln::v1::JobRequest *request,
                                     kiln::v1::JobInfo *reply) override;
  grpc::ServerUnaryReactor *ResumeJob(grpc::CallbackServerContext *context, const kiln::v1::JobRequest *request,
                                      kiln::v1::JobInfo *reply) override;
  grpc::ServerUnaryReactor *CancelJob(grpc::CallbackServerContext *context, const kiln::v1::JobRequest *request,
                                      kiln::v1::JobInfo *reply) override;

 private:
  JobManager &manager_;
  std::string token_;
  SubmissionLimits limits_;
};

}  // namespace kiln::tuner
