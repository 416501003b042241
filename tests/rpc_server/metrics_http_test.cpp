// The metrics endpoint in process, on loopback: GET /metrics answers the exposition with its
// content type, other paths are 404, garbage gets an HTTP error and the endpoint keeps serving,
// and stop() closes the port.
#include "rpc_server/metrics_http.h"

#include <gtest/gtest.h>

#include "contracts/error.h"
#include "tests/rpc_server/http_get.h"
#include "tests/rpc_server/prometheus_text.h"

namespace kiln::rpc {
namespace {

TEST(MetricsServer, ServesTheExpositionAndSurvivesGarbage) {
  MetricsRegistry registry;
  add_process_metrics(registry, "test", "0.0.0");
  registry.counter("kiln_requests_total", "R.").get().inc(2);
  auto server = MetricsServer::start("127.0.0.1:0", registry);
  ASSERT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));

  testing::HttpReply ok = testing::http_get(server->port(), "/metrics");
  EXPECT_EQ(ok.status, 200) << ok.head;
  EXPECT_TRUE(ok.has_header("Content-Type: text/plain; version=0.0.4")) << ok.head;
  EXPECT_EQ(testing::parse_exposition(ok.body).value("kiln_requests_total"), 2);

  EXPECT_EQ(testing::http_get(server->port(), "/").status, 404);
  EXPECT_EQ(testing::http_get(server->port(), "/metricsx").status, 404);
  const testing::HttpReply garbage = testing::http_exchange(server->port(), "\x01\x02 GARBAGE\r\n\r\n");
  EXPECT_GE(garbage.status, 400) << garbage.head;
  const testing::HttpReply huge =
      testing::http_exchange(server->port(), "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_NE(huge.status, 200);
  EXPECT_EQ(testing::http_get(server->port(), "/metrics").status, 200);

  const int port = server->port();
  server->stop();
  server->stop();
  EXPECT_THROW(testing::http_get(port, "/metrics"), std::runtime_error);
}

TEST(MetricsServer, RefusesABadAddress) {
  MetricsRegistry registry;
  EXPECT_THROW(MetricsServer::start("no-port", registry), UserError);
  EXPECT_THROW(MetricsServer::start("127.0.0.1:99999", registry), UserError);
  auto first = MetricsServer::start("127.0.0.1:0", registry);
  EXPECT_THROW(MetricsServer::start("127.0.0.1:" + std::to_string(first->port()), registry), UserError);
}

}  // namespace
}  // namespace kiln::rpc
