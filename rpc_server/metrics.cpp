#include "rpc_server/metrics.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

bool valid_name(const std::string &name, bool colons) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void add_atomic(std::atomic<double> &value, double v) {
  double old = value.load();
  while (!value.compare_exchange_weak(old, old + v)) {
  }
}

std::string escape_help(const std::string &help) {
  std::string out;
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// Seconds since the epoch at which this process started, from /proc; now when /proc cannot say.
double process_start_seconds() {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  std::ifstream system_stat("/proc/stat");
  if (paren == std::string::npos || !system_stat) return now;
  // Fields after the command: state is field 3; starttime is field 22.
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  double boot = -1;
  for (std::string line; std::getline(system_stat, line);) {
    if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  if (boot < 0 || ticks <= 0 || field.empty()) return now;
  try {
    return boot + std::stod(field) / static_cast<double>(ticks);
  } catch (const std::exception &) {
    return now;
  }
}

}  // namespace

void Counter::inc(double v) {
  KILN_CHECK(v >= 0, "a counter only goes up, not by ", v);
  add_atomic(value_, v);
}

void Gauge::inc(double v) { add_atomic(value_, v); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    KILN_CHECK(std::isfinite(bounds_[i]), "a histogram bound must be finite");
    KILN_CHECK(i == 0 || bounds_[i - 1] < bounds_[i], "histogram bounds must increase");
  }
}

void Histogram::observe(double v) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && !(v <= bounds_[bucket])) ++bucket;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> duration_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.0f", v);
    return buffer;
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  KILN_CHECK(ec == std::errc(), "cannot format ", v);
  return std::string(buffer, end);
}

std::string escape_label_value(const std::string &value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace detail {

FamilyBase::FamilyBase(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {
  KILN_CHECK(valid_name(name_, true), "not a metric name: '", name_, "'");
  for (const std::string &l : labels_) {
    KILN_CHECK(valid_name(l, false) && l.rfind("__", 0) != 0, "not a label name: '", l, "' (metric ", name_, ")");
  }
}

void FamilyBase::check_values(const std::vector<std::string> &values) const {
  KILN_CHECK(values.size() == labels_.size(), "metric ", name_, " has ", labels_.size(), " labels, not ",
             values.size());
}

std::string FamilyBase::label_text(const std::vector<std::string> &values, const std::string &extra) const {
  if (labels_.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (i > 0) out += ',';
    out += labels_[i] + "=\"" + escape_label_value(values[i]) + "\"";
  }
  if (!extra.empty()) out += (labels_.empty() ? "" : ",") + extra;
  return out + "}";
}

void FamilyBase::render_header(std::string &out, const char *type) const {
  out += "# HELP " + name_ + " " + escape_help(help_) + "\n";
  out += "# TYPE " + name_ + " " + type + "\n";
}

}  // namespace detail

template <>
void Family<Counter>::render(std::string &out) const {
  render_header(out, "counter");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[values, c] : series_)
    out += name_ + label_text(values) + " " + format_metric_value(c->value()) + "\n";
}

template <>
void Family<Gauge>::render(std::string &out) const {
  render_header(out, "gauge");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[values, g] : series_)
    out += name_ + label_text(values) + " " + format_metric_value(g->value()) + "\n";
}

template <>
void Family<Histogram>::render(std::string &out) const {
  render_header(out, "histogram");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[values, h] : series_) {
    const Histogram::Snapshot s = h->snapshot();
    for (size_t i = 0; i <= s.bounds.size(); ++i) {
      const std::string le = i < s.bounds.size() ? format_metric_value(s.bounds[i]) : "+Inf";
      out += name_ + "_bucket" + label_text(values, "le=\"" + le + "\"") + " " +
             format_metric_value(static_cast<double>(s.cumulative[i])) + "\n";
    }
    out += name_ + "_sum" + label_text(values) + " " + format_metric_value(s.sum) + "\n";
    out += name_ + "_count" + label_text(values) + " " + format_metric_value(static_cast<double>(s.count)) + "\n";
  }
}

template <class F>
F &MetricsRegistry::add(std::unique_ptr<F> family) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &f : families_) {
    KILN_CHECK(f->name() != family->name(), "metric ", family->name(), " is registered twice");
  }
  F &ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Counter> &MetricsRegistry::counter(const std::string &name, const std::string &help,
                                          std::vector<std::string> labels) {
  return add(
      std::make_unique<Family<Counter>>(name, help, std::move(labels), [] { return std::make_unique<Counter>(); }));
}

Family<Gauge> &MetricsRegistry::gauge(const std::string &name, const std::string &help,
                                      std::vector<std::string> labels) {
  return add(std::make_unique<Family<Gauge>>(name, help, std::move(labels), [] { return std::make_unique<Gauge>(); }));
}

Family<Histogram> &MetricsRegistry::histogram(const std::string &name, const std::string &help,
                                              std::vector<std::string> labels, std::vector<double> bounds) {
  for (const std::string &l : labels) KILN_CHECK(l != "le", "a histogram cannot have a label 'le' (", name, ")");
  Histogram check(bounds);  // bad bounds fail here, at registration
  (void)check;
  return add(std::make_unique<Family<Histogram>>(name, help, std::move(labels),
                                                 [bounds] { return std::make_unique<Histogram>(bounds); }));
}

void MetricsRegistry::on_collect(std::function<void()> collector) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::render() {
  std::lock_guard<std::mutex> render_lock(render_mutex_);
  std::vector<std::function<void()>> collectors;
  std::vector<const detail::FamilyBase *> families;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    collectors = collectors_;
    for (const auto &f : families_) families.push_back(f.get());
  }
  for (const auto &collect : collectors) collect();
  std::string out;
  for (const detail::FamilyBase *f : families) f->render(out);
  return out;
}

void add_process_metrics(MetricsRegistry &registry, const std::string &component, const std::string &version) {
  registry.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.")
      .get()
      .set(process_start_seconds());
  registry.gauge("kiln_build_info", "The Kiln build of this daemon; always 1.", {"component", "version"})
      .with({component, version})
      .set(1);
}

}  // namespace kiln::rpc
