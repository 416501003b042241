// The Runner service generated from proto/kiln/v1/runner.proto answers Info on loopback.
#include "contracts/error.h"
#include "rpc_server/runner_service.h"
#include "rpc_server/service_host.h"
#include "deploy/version.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace kiln::rpc {
namespace {

TEST(RunnerRpcTest, AnswersInfoOnLoopback) {
  RunnerService service({"x86-test", "llvm -mcpu=generic"});
  std::unique_ptr<ServiceHost> host = ServiceHost::start("127.0.0.1:0", {&service});
  ASSERT_GT(host->port(), 0);
  EXPECT_EQ(host->address(), "127.0.0.1:" + std::to_string(host->port()));

  auto channel = grpc::CreateChannel(host->address(), grpc::InsecureChannelCredentials());
  auto stub = kiln::v1::Runner::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  kiln::v1::InfoReply reply;
  grpc::Status status = stub->Info(&context, kiln::v1::InfoRequest(), &reply);

  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.device_key(), "x86-test");
  EXPECT_EQ(reply.target(), "llvm -mcpu=generic");
  EXPECT_EQ(reply.kiln_version(), kiln::deploy::version());
  EXPECT_FALSE(reply.kiln_version().empty());
  EXPECT_EQ(reply.cpu_cores(), std::thread::hardware_concurrency());
  std::vector<std::string> features(reply.cpu_features().begin(), reply.cpu_features().end());
  EXPECT_EQ(features, host_cpu_features());

  host->shutdown();
  host->wait();
}

TEST(RunnerRpcTest, ReportsTheCpuFeaturesItWasGiven) {
  RunnerService service({"x86-test", "llvm", {"avx2", "fma"}});
  std::unique_ptr<ServiceHost> host = ServiceHost::start("127.0.0.1:0", {&service});
  auto stub = kiln::v1::Runner::NewStub(grpc::CreateChannel(host->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  kiln::v1::InfoReply reply;
  ASSERT_TRUE(stub->Info(&context, kiln::v1::InfoRequest(), &reply).ok());
  ASSERT_EQ(reply.cpu_features_size(), 2);
  EXPECT_EQ(reply.cpu_features(0), "avx2");
  EXPECT_EQ(reply.cpu_features(1), "fma");
}

TEST(RunnerRpcTest, MeasureIsDeclaredButNotServedYet) {
  RunnerService service({"x86-test", "llvm"});
  std::unique_ptr<ServiceHost> host = ServiceHost::start("127.0.0.1:0", {&service});
  auto stub = kiln::v1::Runner::NewStub(grpc::CreateChannel(host->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->Measure(&context);
  stream->WritesDone();
  kiln::v1::MeasureReply reply;
  EXPECT_FALSE(stream->Read(&reply));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST(RunnerRpcTest, ShutdownIsCleanAndRefusesLaterCalls) {
  RunnerService service({"x86-test", "llvm"});
  std::unique_ptr<ServiceHost> host = ServiceHost::start("127.0.0.1:0", {&service});
  std::string address = host->address();
  host->shutdown(std::chrono::milliseconds(100));
  host->shutdown();  // a second shutdown is harmless
  host.reset();

  auto stub = kiln::v1::Runner::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  kiln::v1::InfoReply reply;
  EXPECT_FALSE(stub->Info(&context, kiln::v1::InfoRequest(), &reply).ok());
}

TEST(RunnerRpcTest, UnusableAddressThrows) {
  RunnerService service({"x86-test", "llvm"});
  // 192.0.2.1 (TEST-NET-1) is not an address of this machine, so binding fails at once.
  EXPECT_THROW(ServiceHost::start("192.0.2.1:0", {&service}), kiln::UserError);
}

}  // namespace
}  // namespace kiln::rpc
