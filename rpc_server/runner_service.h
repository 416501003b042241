#pragma once
// RunnerService: the gRPC Runner service of a device runner (kiln.v1.Runner), on the callback API.
#include <string>

#include "kiln/v1/runner.grpc.pb.h"

namespace kiln::rpc {

// What a runner says about itself.
struct RunnerIdentity {
  // The class of identical devices, for example "x86-znver4".
  std::string device_key;
  // The canonical target string, for example "llvm -mcpu=znver4".
  std::string target;
};

class RunnerService final : public kiln::v1::Runner::CallbackService {
 public:
  explicit RunnerService(RunnerIdentity identity);

  grpc::ServerUnaryReactor *Info(grpc::CallbackServerContext *context,
                                 const kiln::v1::InfoRequest *request,
                                 kiln::v1::InfoReply *reply) override;

 private:
  RunnerIdentity identity_;
};

}  // namespace kiln::rpc
