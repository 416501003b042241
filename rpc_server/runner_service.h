#pragma once
// RunnerService: the gRPC Runner service of a device runner (kiln.v1.Runner), on the callback API.
#include <string>
#include <utility>
#include <vector>

#include "kiln/v1/runner.grpc.pb.h"

namespace kiln::rpc {

// What a runner says about itself.
struct RunnerIdentity {
  RunnerIdentity(std::string device_key, std::string target,
                 std::vector<std::string> cpu_features = {})
      : device_key(std::move(device_key)),
        target(std::move(target)),
        cpu_features(std::move(cpu_features)) {}

  // The class of identical devices, for example "x86-znver4".
  std::string device_key;
  // The canonical target string, for example "llvm -mcpu=znver4".
  std::string target;
  // CPU features reported by Info; host_cpu_features() when left empty.
  std::vector<std::string> cpu_features;
};

// The features of this machine's CPU that matter to code generation, for example "avx2", "fma".
std::vector<std::string> host_cpu_features();

class RunnerService final : public kiln::v1::Runner::CallbackService {
 public:
  explicit RunnerService(RunnerIdentity identity);

  grpc::ServerUnaryReactor *Info(grpc::CallbackServerContext *context,
                                 const kiln::v1::InfoRequest *request,
                                 kiln::v1::InfoReply *reply) override;
  // Measure is not served yet: the generated base class answers UNIMPLEMENTED.

 private:
  RunnerIdentity identity_;
};

}  // namespace kiln::rpc
