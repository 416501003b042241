#pragma once
// MetricsServer: a daemon's metrics over HTTP for Prometheus. GET /metrics answers the registry's
// text exposition (kMetricsContentType); a daemon may answer other paths with a handler of its
// own (HttpHandler), else they are 404, and a malformed request gets
// an HTTP error without disturbing the daemon. Serves on threads of its own; stop() (or the
// destructor) closes the port and joins them. The HTTP library stays inside this one file's
// implementation.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "rpc_server/metrics.h"

namespace kiln::rpc {

// A request to a path other than /metrics, as an HttpHandler sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::map<std::string, std::string> headers;  // besides Content-Type and Content-Length
};

// Answers GET and POST requests to every path but /metrics. Exceptions become a 500.
using HttpHandler = std::function<HttpResponse(const HttpRequest &)>;

class MetricsServer {
 public:
  // Serves `registry` (which must outlive the server) on `address`, HOST:PORT ("[::1]:PORT" for
  // an IPv6 host), where port 0 lets the OS choose a free port. Throws kiln::UserError when the
  // address is malformed or cannot be bound.
  // With `handler`, the other paths go to it (which must outlive the server).
  static std::unique_ptr<MetricsServer> start(const std::string &address, MetricsRegistry &registry,
                                              HttpHandler handler = {});

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
