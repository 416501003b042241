#pragma once
// EventLog: the structured log of Kiln's daemons (kilnd, kiln-tracker, kiln-runner). One line per
// event, written whole, in one of two formats:
//   text  ts=2024-05-01T12:00:00.123Z level=info component=kilnd event=job_started job=3 name=mm
//   json {"ts":"2024-05-01T12:00:00.123Z","level":"info","component":"kilnd","event":"job_started","job":3,"name":"mm"}
// `ts` is RFC 3339 UTC with milliseconds; `event` is a short snake_case name; the event's own
// fields follow. A text value is written bare when it holds no space, quote, '=' or control
// character, else in double quotes with \" \\ \n \r \t escapes. JSON strings that are not valid
// UTF-8 have the bad bytes replaced by U+FFFD, so every line parses.
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace kiln::rpc {

enum class LogFormat { kText, kJson };
// "text" or "json"; throws kiln::UserError for anything else.
LogFormat parse_log_format(const std::string &name);

enum class LogLevel { kDebug, kInfo, kWarn, kError };
// "debug", "info", "warn", "error".
const char *to_string(LogLevel level);

// One field of an event: a key and a string, integer, floating-point or boolean value.
struct LogField {
  using Value = std::variant<std::string, int64_t, double, bool>;

  LogField(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  LogField(std::string k, const char *v) : key(std::move(k)), value(std::string(v)) {}
  LogField(std::string k, bool v) : key(std::move(k)), value(v) {}
  LogField(std::string k, double v) : key(std::move(k)), value(v) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogField(std::string k, T v) : key(std::move(k)), value(static_cast<int64_t>(v)) {}

  std::string key;
  Value value;
};

class EventLog {
 public:
  // Receives each line, without its newline.
  using Sink = std::function<void(const std::string &line)>;

  // Writes to stderr.
  explicit EventLog(std::string component, LogFormat format = LogFormat::kText);
  EventLog(std::string component, LogFormat format, Sink sink);
  EventLog(const EventLog &) = delete;
  EventLog &operator=(const EventLog &) = delete;

  const std::string &component() const { return component_; }
  LogFormat format() const { return format_; }

  // Thread-safe: lines of concurrent calls never interleave.
  void write(LogLevel level, std::string_view event, const std::vector<LogField> &fields = {});
  void info(std::string_view event, const std::vector<LogField> &fields = {}) { write(LogLevel::kInfo, event, fields); }
  void warn(std::string_view event, const std::vector<LogField> &fields = {}) { write(LogLevel::kWarn, event, fields); }
  void error(std::string_view event, const std::vector<LogField> &fields = {}) {
    write(LogLevel::kError, event, fields);
  }

  // The line write() would emit at `time`, without its newline.
  std::string format_line(std::chrono::system_clock::time_point time, LogLevel level, std::string_view event,
                          const std::vector<LogField> &fields) const;

 private:
  std::string component_;
  LogFormat format_;
  Sink sink_;
  std::mutex mutex_;
};

// `time` as RFC 3339 UTC with milliseconds: "2024-05-01T12:00:00.123Z".
std::string rfc3339_utc(std::chrono::system_clock::time_point time);

}  // namespace kiln::rpc
