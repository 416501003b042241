#include "rpc_server/runner_service.h"

#include <thread>
#include <utility>

#include "tuner/version.h"

namespace kiln::rpc {

std::vector<std::string> host_cpu_features() {
  std::vector<std::string> features;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) features.push_back("sse4.2");
  if (__builtin_cpu_supports("avx")) features.push_back("avx");
  if (__builtin_cpu_supports("avx2")) features.push_back("avx2");
  if (__builtin_cpu_supports("fma")) features.push_back("fma");
  if (__builtin_cpu_supports("avx512f")) features.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) features.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) features.push_back("avx512vl");
  if (__builtin_cpu_supports("avx512vnni")) features.push_back("avx512vnni");
#elif defined(__aarch64__)
  features.push_back("neon");
#endif
  return features;
}

RunnerService::RunnerService(RunnerIdentity identity) : identity_(std::move(identity)) {
  if (identity_.cpu_features.empty()) identity_.cpu_features = host_cpu_features();
}

grpc::ServerUnaryReactor *RunnerService::Info(grpc::CallbackServerContext *context,
                                              const kiln::v1::InfoRequest * /*request*/,
                                              kiln::v1::InfoReply *reply) {
  reply->set_device_key(identity_.device_key);
  reply->set_target(identity_.target);
  reply->set_kiln_version(kiln::tuner::version());
  reply->set_cpu_cores(std::thread::hardware_concurrency());
  for (const std::string &feature : identity_.cpu_features) reply->add_cpu_features(feature);
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kiln::rpc
