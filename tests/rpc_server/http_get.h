#pragma once
// A bare HTTP/1.1 client over a socket, for the metrics endpoint tests: sends bytes as they are
// (a well-formed GET, or garbage) and reads the reply until the server closes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace kiln::testing {

struct HttpReply {
  int status = 0;  // 0: no reply
  std::string head, body;
  bool has_header(const std::string &line) const { return head.find(line) != std::string::npos; }
};

// Sends `request` to 127.0.0.1:`port` and returns what came back.
inline HttpReply http_exchange(int port, const std::string &request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket");
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    close(fd);
    throw std::runtime_error("cannot connect to port " + std::to_string(port));
  }
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  // Until the server closes, or the whole body of a reply with a Content-Length is in.
  for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;) {
    raw.append(buffer, static_cast<size_t>(n));
    const size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    const size_t length_at = raw.substr(0, head_end).find("Content-Length: ");
    if (length_at == std::string::npos) continue;
    const size_t length = std::stoul(raw.substr(length_at + 16));
    if (raw.size() >= head_end + 4 + length) break;
  }
  close(fd);
  HttpReply reply;
  const size_t end = raw.find("\r\n\r\n");
  reply.head = raw.substr(0, end);
  if (end != std::string::npos) reply.body = raw.substr(end + 4);
  if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() > 12) reply.status = std::stoi(raw.substr(9, 3));
  return reply;
}

inline HttpReply http_get(int port, const std::string &path) {
  return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

// The port of "HOST:PORT" in the line "metrics listening on HOST:PORT" of `text`; 0 when none.
inline int metrics_port(const std::string &text) {
  const std::string marker = "metrics listening on ";
  const size_t at = text.find(marker);
  if (at == std::string::npos) return 0;
  const size_t eol = text.find('\n', at);
  const std::string address =
      text.substr(at + marker.size(), eol == std::string::npos ? eol : eol - at - marker.size());
  return std::stoi(address.substr(address.rfind(':') + 1));
}

}  // namespace kiln::testing
