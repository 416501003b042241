#include "rpc_server/runner_service.h"

#include <thread>
#include <utility>

#include "tuner/version.h"

namespace kiln::rpc {

RunnerService::RunnerService(RunnerIdentity identity) : identity_(std::move(identity)) {}

grpc::ServerUnaryReactor *RunnerService::Info(grpc::CallbackServerContext *context,
                                              const kiln::v1::InfoRequest * /*request*/,
                                              kiln::v1::InfoReply *reply) {
  reply->set_device_key(identity_.device_key);
  reply->set_target(identity_.target);
  reply->set_kiln_version(kiln::tuner::version());
  reply->set_cpu_cores(std::thread::hardware_concurrency());
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kiln::rpc
