// The daemons' metrics registry and structured log, in process: the exposition's text (HELP and
// TYPE lines, label escaping, histogram buckets), concurrent updates, and event lines in both
// formats.
#include "rpc_server/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "contracts/error.h"
#include "contracts/json.h"
#include "rpc_server/event_log.h"
#include "tests/rpc_server/prometheus_text.h"

namespace kiln::rpc {
namespace {

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(MetricsRegistry, RendersHelpTypeAndSamplesThatAStrictParserAccepts) {
  MetricsRegistry r;
  r.counter("kiln_things_total", "Things done.", {"kind"}).with({"a"}).inc(3);
  r.gauge("kiln_level", "A level.").get().set(-2.5);
  r.histogram("kiln_wait_seconds", "Waits.", {}, {0.1, 1}).get().observe(0.5);
  const std::string text = r.render();
  EXPECT_TRUE(has(text,
                  "# HELP kiln_things_total Things done.\n# TYPE kiln_things_total counter\n"
                  "kiln_things_total{kind=\"a\"} 3\n"))
      << text;
  EXPECT_TRUE(has(text, "# TYPE kiln_level gauge\nkiln_level -2.5\n")) << text;
  const testing::Exposition e = testing::parse_exposition(text);
  EXPECT_EQ(e.types.at("kiln_wait_seconds"), "histogram");
  EXPECT_EQ(e.value("kiln_things_total", {{"kind", "a"}}), 3);
  EXPECT_EQ(e.value("kiln_level"), -2.5);
}

TEST(MetricsRegistry, EscapesLabelValuesAndHelpText) {
  MetricsRegistry r;
  r.gauge("kiln_weird", "Back\\slash and\nnewline.", {"key"}).with({"a\"b\\c\nd"}).set(1);
  const std::string text = r.render();
  EXPECT_TRUE(has(text, "# HELP kiln_weird Back\\\\slash and\\nnewline.\n")) << text;
  EXPECT_TRUE(has(text, "kiln_weird{key=\"a\\\"b\\\\c\\nd\"} 1\n")) << text;
  // The parser reads the value back as it was.
  EXPECT_EQ(testing::parse_exposition(text).value("kiln_weird", {{"key", "a\"b\\c\nd"}}), 1);
  EXPECT_EQ(escape_label_value("plain"), "plain");
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeAndEndInInf) {
  MetricsRegistry r;
  Histogram &h = r.histogram("kiln_h_seconds", "H.", {"op"}, {0.5, 1, 2}).with({"x"});
  for (double v : {0.1, 0.5, 0.7, 1.0, 1.5, 3.0, 100.0}) h.observe(v);
  const Histogram::Snapshot s = h.snapshot();
  // <= 0.5: 0.1 0.5; <= 1: + 0.7 1.0; <= 2: + 1.5; +Inf: + 3 100.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 7}));
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 106.8);
  const std::string text = r.render();
  EXPECT_TRUE(has(text, "kiln_h_seconds_bucket{op=\"x\",le=\"0.5\"} 2\n")) << text;
  EXPECT_TRUE(has(text, "kiln_h_seconds_bucket{op=\"x\",le=\"1\"} 4\n")) << text;
  EXPECT_TRUE(has(text, "kiln_h_seconds_bucket{op=\"x\",le=\"+Inf\"} 7\n")) << text;
  EXPECT_TRUE(has(text, "kiln_h_seconds_count{op=\"x\"} 7\n")) << text;
  EXPECT_TRUE(has(text, "kiln_h_seconds_sum{op=\"x\"} 106.8\n")) << text;
  testing::parse_exposition(text);
}

TEST(MetricsRegistry, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry r;
  auto &counter = r.counter("kiln_c_total", "C.", {"t"});
  Gauge &gauge = r.gauge("kiln_g", "G.").get();
  Histogram &h = r.histogram("kiln_h", "H.", {}, {1}).get();
  constexpr int kThreads = 8, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        counter.with({std::to_string(t % 2)}).inc();
        gauge.inc();
        h.observe(0.5);
        if (i % 1000 == 0) r.render();
      }
    });
  }
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(counter.with({"0"}).value() + counter.with({"1"}).value(), kThreads * kEach);
  EXPECT_EQ(gauge.value(), kThreads * kEach);
  EXPECT_EQ(h.snapshot().count, static_cast<uint64_t>(kThreads * kEach));
}

TEST(MetricsRegistry, CollectorsRunBeforeEachRender) {
  MetricsRegistry r;
  Gauge &g = r.gauge("kiln_collected", "C.").get();
  int calls = 0;
  r.on_collect([&] { g.set(++calls); });
  EXPECT_TRUE(has(r.render(), "kiln_collected 1\n"));
  EXPECT_TRUE(has(r.render(), "kiln_collected 2\n"));
}

TEST(MetricsRegistry, RefusesBadNamesTwiceRegisteredNamesAndWrongLabelCounts) {
  MetricsRegistry r;
  EXPECT_THROW(r.counter("2bad", "x"), InternalError);
  EXPECT_THROW(r.counter("kiln_ok_total", "x", {"bad-label"}), InternalError);
  EXPECT_THROW(r.histogram("kiln_hist", "x", {"le"}, {1}), InternalError);
  EXPECT_THROW(r.histogram("kiln_hist2", "x", {}, {2, 1}), InternalError);
  auto &c = r.counter("kiln_twice_total", "x", {"a"});
  EXPECT_THROW(r.gauge("kiln_twice_total", "x"), InternalError);
  EXPECT_THROW(c.with({"a", "b"}), InternalError);
  EXPECT_THROW(c.with({"a"}).inc(-1), InternalError);
}

TEST(MetricsRegistry, FormatsValues) {
  EXPECT_EQ(format_metric_value(3), "3");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(INFINITY), "+Inf");
  EXPECT_EQ(format_metric_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_metric_value(NAN), "NaN");
  EXPECT_EQ(std::stod(format_metric_value(0.1 + 0.2)), 0.1 + 0.2);
}

TEST(MetricsRegistry, ProcessMetricsNameTheBuildAndAStartInThePast) {
  MetricsRegistry r;
  add_process_metrics(r, "kilnd", "1.2.3");
  const testing::Exposition e = testing::parse_exposition(r.render());
  EXPECT_EQ(e.value("kiln_build_info", {{"component", "kilnd"}, {"version", "1.2.3"}}), 1);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = e.value("process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);
}

TEST(PrometheusTextParser, RejectsWhatTheFormatForbids) {
  EXPECT_THROW(testing::parse_exposition("kiln_x 1\n"), std::runtime_error);  // no TYPE
  EXPECT_THROW(testing::parse_exposition("# TYPE kiln_x gauge\nkiln_x{a=\"1\",} 1\n"), std::runtime_error);
  EXPECT_THROW(testing::parse_exposition("# TYPE kiln_x gauge\nkiln_x{a=\"\\t\"} 1\n"), std::runtime_error);
  EXPECT_THROW(testing::parse_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                                         "h_sum 1\nh_count 1\n"),
               std::runtime_error);
  EXPECT_THROW(testing::parse_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"),
               std::runtime_error);
  EXPECT_NO_THROW(
      testing::parse_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                                "h_sum 1\nh_count 2\n"));
}

TEST(EventLog, JsonLinesCarryTheRequiredKeysAndParse) {
  std::vector<std::string> lines;
  EventLog log("kilnd", LogFormat::kJson, [&](const std::string &line) { lines.push_back(line); });
  log.info("job_started", {{"job", 7}, {"name", "mm \"q\"\n"}, {"ok", true}, {"seconds", 0.5}});
  log.error("bad_bytes", {{"error", std::string("a\xff\xfe"
                                                "b\x01")}});
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string &line : lines) EXPECT_EQ(line.find('\n'), std::string::npos);
  const contracts::Json first = contracts::Json::parse(lines[0]);
  EXPECT_EQ(first["level"].as_string(), "info");
  EXPECT_EQ(first["component"].as_string(), "kilnd");
  EXPECT_EQ(first["event"].as_string(), "job_started");
  EXPECT_EQ(first["job"].as_int(), 7);
  EXPECT_EQ(first["name"].as_string(), "mm \"q\"\n");
  const std::string ts = first["ts"].as_string();
  ASSERT_EQ(ts.size(), 24u) << ts;  // 2024-05-01T12:00:00.123Z
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts[19], '.');
  EXPECT_EQ(ts.back(), 'Z');
  const contracts::Json second = contracts::Json::parse(lines[1]);
  EXPECT_EQ(second["level"].as_string(), "error");
  EXPECT_EQ(second["error"].as_string(),
            "a\xef\xbf\xbd\xef\xbf\xbd"
            "b\x01");
}

TEST(EventLog, TextLinesAreKeyValuePairs) {
  EventLog log("tracker", LogFormat::kText, [](const std::string &) {});
  const auto time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1714564800123));
  EXPECT_EQ(log.format_line(time, LogLevel::kWarn, "runner_lost", {{"runner", "r-1"}, {"why", "no heartbeat"}}),
            "ts=2024-05-01T12:00:00.123Z level=warn component=tracker event=runner_lost runner=r-1 "
            "why=\"no heartbeat\"");
  EXPECT_EQ(log.format_line(time, LogLevel::kInfo, "e", {{"q", "a\"b"}, {"empty", ""}, {"n", int64_t(-3)}}),
            "ts=2024-05-01T12:00:00.123Z level=info component=tracker event=e q=\"a\\\"b\" empty=\"\" n=-3");
  EXPECT_EQ(parse_log_format("json"), LogFormat::kJson);
  EXPECT_THROW(parse_log_format("xml"), UserError);
}

}  // namespace
}  // namespace kiln::rpc
