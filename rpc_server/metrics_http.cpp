#include "rpc_server/metrics_http.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <mutex>
#include <thread>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

// HOST and PORT of "HOST:PORT" or "[HOST]:PORT".
std::pair<std::string, int> split_address(const std::string &address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw UserError("a metrics address is HOST:PORT, not '" + address + "'");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) port = -1;
  } catch (const std::exception &) {
  }
  if (port < 0 || port > 65535) throw UserError("the port of the metrics address '" + address + "' is not 0..65535");
  return {host, port};
}

}  // namespace

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::mutex stop_mutex;
  bool stopped = false;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string address, int port)
    : impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

std::unique_ptr<MetricsServer> MetricsServer::start(const std::string &address, MetricsRegistry &registry,
                                                    HttpHandler handler) {
  auto [host, port] = split_address(address);
  auto impl = std::make_unique<Impl>();
  httplib::Server &server = impl->server;
  // Without the library's default SO_REUSEPORT: a second daemon on the same port must fail to bind.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void *>(&yes), sizeof yes);
  });
  server.set_read_timeout(std::chrono::seconds(5));
  server.set_write_timeout(std::chrono::seconds(5));
  server.set_keep_alive_max_count(100);
  server.set_payload_max_length(64 << 10);
  server.Get("/metrics", [&registry](const httplib::Request &, httplib::Response &response) {
    response.set_content(registry.render(), kMetricsContentType);
  });
  if (handler) {
    auto answer = [handler](const httplib::Request &request, httplib::Response &response) {
      HttpRequest in;
      in.method = request.method;
      in.path = request.path;
      for (const auto &[name, value] : request.params) in.query.emplace(name, value);
      for (const auto &[name, value] : request.headers) {
        std::string lower = name;
        for (char &c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        in.headers.emplace(lower, value);
      }
      in.body = request.body;
      HttpResponse out = handler(in);
      response.status = out.status;
      for (const auto &[name, value] : out.headers) response.set_header(name, value);
      response.set_content(out.body, out.content_type);
    };
    server.Get(".*", answer);
    server.Post(".*", answer);
  }
  server.set_exception_handler([](const httplib::Request &, httplib::Response &response, std::exception_ptr) {
    response.status = 500;
    response.set_content("internal error\n", "text/plain");
  });
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) throw UserError("cannot serve metrics on " + address + ": the address cannot be bound");
  Impl *raw = impl.get();
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  // stop() only ends a server that runs: wait for it to.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), shown + ":" + std::to_string(bound), bound));
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kiln::rpc
