#include "rpc_server/service_host.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <utility>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

// "127.0.0.1:0" -> "127.0.0.1", "[::1]:0" -> "[::1]".
std::string host_of(const std::string &address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return address;
  return address.substr(0, colon);
}

}  // namespace

ServiceHost::ServiceHost(std::unique_ptr<grpc::Server> server, int port, std::string address)
    : server_(std::move(server)), port_(port), address_(std::move(address)) {}

std::unique_ptr<ServiceHost> ServiceHost::start(const std::string &address,
                                                const std::vector<grpc::Service *> &services,
                                                const ServiceHostOptions &options) {
  // A process-wide switch, read when a server is built.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(address, server_credentials(options.tls), &selected_port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Notice clients that have gone away (a killed tuner) even while their stream is idle.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  for (grpc::Service *service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected_port == 0) {
    throw UserError("rpc: cannot listen on " + address);
  }
  std::string bound = host_of(address) + ":" + std::to_string(selected_port);
  return std::unique_ptr<ServiceHost>(new ServiceHost(std::move(server), selected_port, bound));
}

ServiceHost::~ServiceHost() {
  shutdown();
  wait();
}

void ServiceHost::set_serving(const std::string &service_name, bool serving) {
  if (grpc::HealthCheckServiceInterface *health = server_->GetHealthCheckService()) {
    health->SetServingStatus(service_name, serving);
  }
}

void ServiceHost::shutdown(std::chrono::milliseconds grace) {
  if (grpc::HealthCheckServiceInterface *health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  // grpc::Server::Shutdown is thread-safe and a no-op after the first call.
  server_->Shutdown(std::chrono::system_clock::now() + grace);
}

void ServiceHost::wait() { server_->Wait(); }

}  // namespace kiln::rpc
