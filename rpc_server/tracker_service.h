#pragma once
// TrackerService: the gRPC Tracker service (kiln.v1.Tracker) on the callback API, in front of a
// Tracker. It checks the shared token and the request fields, then asks the Tracker; an Acquire
// waits without holding a thread and is withdrawn when its caller cancels or goes away; a HoldLease
// call ties a lease to its holder's connection, so that a holder that dies (even by SIGKILL) frees
// its runner at once.
#include "kiln/v1/tracker.grpc.pb.h"
#include "rpc_server/tracker.h"

namespace kiln::rpc {

// The largest |priority| an Acquire may ask for.
constexpr int kMaxAcquirePriority = 1000;
// The longest device key or address a request may carry.
constexpr size_t kMaxNameLength = 256;
// The longest target: a native target on a CPU the compiler cannot name lists every feature the
// host has (over 500 bytes for an x86 CPU with AVX-512).
constexpr size_t kMaxTargetLength = 2048;

class TrackerService final : public kiln::v1::Tracker::CallbackService {
 public:
  // Throws kiln::UserError for unusable options (see Tracker).
  explicit TrackerService(TrackerOptions options);

  Tracker &tracker() { return tracker_; }

  grpc::ServerUnaryReactor *Register(grpc::CallbackServerContext *context, const kiln::v1::RegisterRequest *request,
                                     kiln::v1::RegisterReply *reply) override;
  grpc::ServerUnaryReactor *Heartbeat(grpc::CallbackServerContext *context, const kiln::v1::HeartbeatRequest *request,
                                      kiln::v1::HeartbeatReply *reply) override;
  grpc::ServerUnaryReactor *Acquire(grpc::CallbackServerContext *context, const kiln::v1::AcquireRequest *request,
                                    kiln::v1::AcquireReply *reply) override;
  grpc::ServerUnaryReactor *Release(grpc::CallbackServerContext *context, const kiln::v1::ReleaseRequest *request,
                                    kiln::v1::ReleaseReply *reply) override;
  grpc::ServerWriteReactor<kiln::v1::HoldLeaseReply> *HoldLease(grpc::CallbackServerContext *context,
                                                                const kiln::v1::HoldLeaseRequest *request) override;
  grpc::ServerUnaryReactor *Summary(grpc::CallbackServerContext *context, const kiln::v1::SummaryRequest *request,
                                    kiln::v1::SummaryReply *reply) override;

 private:
  Tracker tracker_;
};

}  // namespace kiln::rpc
