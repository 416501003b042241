#pragma once
// MetricsServer: a daemon's metrics over HTTP for Prometheus. GET /metrics answers the registry's
// text exposition (kMetricsContentType); every other path is 404, and a malformed request gets
// an HTTP error without disturbing the daemon. Serves on threads of its own; stop() (or the
// destructor) closes the port and joins them. The HTTP library stays inside this one file's
// implementation.
#include <memory>
#include <string>

#include "rpc_server/metrics.h"

namespace kiln::rpc {

class MetricsServer {
 public:
  // Serves `registry` (which must outlive the server) on `address`, HOST:PORT ("[::1]:PORT" for
  // an IPv6 host), where port 0 lets the OS choose a free port. Throws kiln::UserError when the
  // address is malformed or cannot be bound.
  static std::unique_ptr<MetricsServer> start(const std::string &address, MetricsRegistry &registry);

  ~MetricsServer();
  MetricsServer(const MetricsServer &) = delete;
  MetricsServer &operator=(const MetricsServer &) = delete;

  // The host part of the requested address with the bound port.
  const std::string &address() const { return address_; }
  int port() const { return port_; }

  // Stops accepting, ends the connections and joins the server's threads. Safe to call more than
  // once.
  void stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl, std::string address, int port);

  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_;
};

}  // namespace kiln::rpc
