#pragma once
// ServiceHost: a running gRPC server hosting a set of services, shut down cleanly on destruction.
// Every host also serves the standard gRPC health service (grpc.health.v1.Health), built into
// grpc++: the overall status "" is SERVING from start until shutdown.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rpc_server/credentials.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace kiln::rpc {

struct ServiceHostOptions {
  // Plaintext unless set (see TlsFiles).
  TlsFiles tls;
  // The largest request or reply message; a larger one fails with RESOURCE_EXHAUSTED.
  int max_message_bytes = 16 << 20;
};

class ServiceHost {
 public:
  // Starts serving `services` (owned by the caller, and outliving the host) on `address`, for
  // example "127.0.0.1:0", where port 0 lets the OS choose a free port. Throws
  // kiln::UserError when the address cannot be bound or a TLS file cannot be read.
  static std::unique_ptr<ServiceHost> start(const std::string &address, const std::vector<grpc::Service *> &services,
                                            const ServiceHostOptions &options = {});

  ServiceHost(const ServiceHost &) = delete;
  ServiceHost &operator=(const ServiceHost &) = delete;
  // Shuts down with the default grace period if shutdown() was not called.
  ~ServiceHost();

  // The port actually bound.
  int port() const { return port_; }
  // The host part of the requested address with the bound port, for clients to dial.
  const std::string &address() const { return address_; }

  // Sets the health status reported for `service_name`, for example "kiln.v1.Tracker" (""
  // names the server as a whole).
  void set_serving(const std::string &service_name, bool serving);

  // Reports NOT_SERVING to health checks, stops accepting calls, lets in-flight calls finish for up
  // to `grace`, then cancels the rest. Safe to call more than once and from any thread.
  void shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Blocks until the server has shut down.
  void wait();

 private:
  ServiceHost(std::unique_ptr<grpc::Server> server, int port, std::string address);

  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::string address_;
};

}  // namespace kiln::rpc
