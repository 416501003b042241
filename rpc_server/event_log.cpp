#include "rpc_server/event_log.h"

#include <cmath>
#include <cstdio>
#include <ctime>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

// Appends the escape of `c` when it is one of the characters both log formats escape (quote,
// backslash, newline, carriage return, tab); false for any other character.
bool append_escape(std::string &out, char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return true;
    case '\\':
      out += "\\\\";
      return true;
    case '\n':
      out += "\\n";
      return true;
    case '\r':
      out += "\\r";
      return true;
    case '\t':
      out += "\\t";
      return true;
    default:
      return false;
  }
}

// Appends `s` as a JSON string; invalid UTF-8 bytes become U+FFFD.
void append_json_string(std::string &out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (!append_escape(out, static_cast<char>(c))) {
        if (c < 0x20 || c == 0x7f) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
      }
      ++i;
      continue;
    }
    // The length of a well-formed sequence starting here, or 0.
    size_t n = 0;
    if (c >= 0xc2 && c <= 0xdf)
      n = 2;
    else if (c >= 0xe0 && c <= 0xef)
      n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 4;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n == 3) {
      const unsigned char d = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && d < 0xa0) && !(c == 0xed && d >= 0xa0);  // overlong, surrogate
    }
    if (ok && n == 4) {
      const unsigned char d = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xf0 && d < 0x90) && !(c == 0xf4 && d >= 0x90);  // overlong, beyond U+10FFFF
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  out += '"';
}

bool needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
  }
  return false;
}

void append_text_string(std::string &out, std::string_view s) {
  if (!needs_quotes(s)) {
    out.append(s);
    return;
  }
  out += '"';
  for (char ch : s) {
    if (!append_escape(out, ch)) out += ch;
  }
  out += '"';
}

std::string number_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

void append_value(std::string &out, const LogField::Value &value, LogFormat format) {
  if (const auto *s = std::get_if<std::string>(&value)) {
    if (format == LogFormat::kJson)
      append_json_string(out, *s);
    else
      append_text_string(out, *s);
  } else if (const auto *i = std::get_if<int64_t>(&value)) {
    out += std::to_string(*i);
  } else if (const auto *d = std::get_if<double>(&value)) {
    if (std::isfinite(*d))
      out += number_text(*d);
    else
      out += format == LogFormat::kJson ? "null" : (std::isnan(*d) ? "NaN" : (*d > 0 ? "+Inf" : "-Inf"));
  } else {
    out += std::get<bool>(value) ? "true" : "false";
  }
}

void append_field(std::string &out, std::string_view key, const LogField::Value &value, LogFormat format) {
  if (format == LogFormat::kJson) {
    if (out.size() > 1) out += ',';
    append_json_string(out, key);
    out += ':';
  } else {
    if (!out.empty()) out += ' ';
    out.append(key);
    out += '=';
  }
  append_value(out, value, format);
}

}  // namespace

LogFormat parse_log_format(const std::string &name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  throw UserError("the log format is 'text' or 'json', not '" + name + "'");
}

const char *to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string rfc3339_utc(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  const int millis = static_cast<int>(((ms % 1000) + 1000) % 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buffer;
}

EventLog::EventLog(std::string component, LogFormat format)
    : EventLog(std::move(component), format, [](const std::string &line) {
        std::string whole = line + "\n";
        std::fwrite(whole.data(), 1, whole.size(), stderr);
        std::fflush(stderr);
      }) {}

EventLog::EventLog(std::string component, LogFormat format, Sink sink)
    : component_(std::move(component)), format_(format), sink_(std::move(sink)) {}

std::string EventLog::format_line(std::chrono::system_clock::time_point time, LogLevel level, std::string_view event,
                                  const std::vector<LogField> &fields) const {
  std::string out = format_ == LogFormat::kJson ? "{" : "";
  append_field(out, "ts", rfc3339_utc(time), format_);
  append_field(out, "level", std::string(to_string(level)), format_);
  append_field(out, "component", component_, format_);
  append_field(out, "event", std::string(event), format_);
  for (const LogField &f : fields) append_field(out, f.key, f.value, format_);
  if (format_ == LogFormat::kJson) out += '}';
  return out;
}

void EventLog::write(LogLevel level, std::string_view event, const std::vector<LogField> &fields) {
  const std::string line = format_line(std::chrono::system_clock::now(), level, event, fields);
  std::lock_guard<std::mutex> lock(mutex_);
  sink_(line);
}

}  // namespace kiln::rpc
