#pragma once
// MetricsRegistry: a daemon's metrics (counters, gauges, histograms, each a family of series told
// apart by label values) and their Prometheus text exposition (format 0.0.4), computed here and
// nowhere else. Every operation is thread-safe. Families live as long as the registry; a series,
// once made, until its family's clear().
//
//   MetricsRegistry registry;
//   auto &trials = registry.counter("kiln_tuner_trials_total", "Trials measured.", {"error"});
//   trials.with({"ok"}).inc();
//   registry.render();  // # HELP ...\n# TYPE kiln_tuner_trials_total counter\n...
//
// Names follow Prometheus: a metric [a-zA-Z_:][a-zA-Z0-9_:]*, a label [a-zA-Z_][a-zA-Z0-9_]* not
// starting with "__" (and not "le" on a histogram); a bad name, a name registered twice or a wrong
// number of label values is an internal error.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::rpc {

// A value that only goes up.
class Counter {
 public:
  // Adds `v` (>= 0).
  void inc(double v = 1);
  // For a counter that mirrors a count kept elsewhere (read at collection): sets the total, which
  // must not go down.
  void set_total(double v) { value_.store(v); }
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void set(double v) { value_.store(v); }
  void inc(double v = 1);
  void dec(double v = 1) { inc(-v); }
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted in buckets: bucket i counts the observations <= bounds[i], and +Inf all.
class Histogram {
 public:
  // `bounds`: finite, strictly increasing (checked).
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (bounds.size() + 1 entries)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Bucket bounds for durations in seconds, from 1 ms to 5 min.
std::vector<double> duration_buckets();

namespace detail {
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> labels);
  virtual ~FamilyBase() = default;
  const std::string &name() const { return name_; }
  virtual void render(std::string &out) const = 0;

 protected:
  void check_values(const std::vector<std::string> &values) const;
  // `{a="x",b="y"}` for the values (with `extra` as one more label when set), "" without labels.
  std::string label_text(const std::vector<std::string> &values, const std::string &extra = "") const;
  void render_header(std::string &out, const char *type) const;

  std::string name_, help_;
  std::vector<std::string> labels_;
};
}  // namespace detail

// The series of one metric, by label values (in the order of the family's label names).
template <class Metric>
class Family : public detail::FamilyBase {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labels,
         std::function<std::unique_ptr<Metric>()> make)
      : FamilyBase(std::move(name), std::move(help), std::move(labels)), make_(std::move(make)) {}

  // The series with these label values, made (at zero) on first use.
  Metric &with(const std::vector<std::string> &values) {
    check_values(values);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = series_.find(values);
    if (it == series_.end()) it = series_.emplace(values, make_()).first;
    return *it->second;
  }
  // The one series of a family without labels.
  Metric &get() { return with({}); }
  // Removes every series (references to them become invalid): for a collector that sets the
  // series that exist now (device keys come and go).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    series_.clear();
  }
  void render(std::string &out) const override;

 private:
  std::function<std::unique_ptr<Metric>()> make_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_;
};

template <>
void Family<Counter>::render(std::string &out) const;
template <>
void Family<Gauge>::render(std::string &out) const;
template <>
void Family<Histogram>::render(std::string &out) const;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry &) = delete;
  MetricsRegistry &operator=(const MetricsRegistry &) = delete;

  Family<Counter> &counter(const std::string &name, const std::string &help, std::vector<std::string> labels = {});
  Family<Gauge> &gauge(const std::string &name, const std::string &help, std::vector<std::string> labels = {});
  Family<Histogram> &histogram(const std::string &name, const std::string &help, std::vector<std::string> labels,
                               std::vector<double> bounds);

  // Runs before every render(), one at a time: sets the metrics computed from state (queue
  // lengths, jobs by state) rather than counted as events happen.
  void on_collect(std::function<void()> collector);

  // The text exposition of every family, in registration order, series sorted by label values.
  std::string render();

 private:
  template <class F>
  F &add(std::unique_ptr<F> family);

  std::mutex mutex_;         // registration
  std::mutex render_mutex_;  // one render (and its collectors) at a time
  std::vector<std::unique_ptr<detail::FamilyBase>> families_;
  std::vector<std::function<void()>> collectors_;
};

// The Content-Type of the exposition.
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// `v` as the exposition writes a sample value or a bucket bound: "+Inf", "-Inf", "NaN", an integer
// without a fraction, else the shortest text that reads back as `v`.
std::string format_metric_value(double v);
// A label value with \\, \" and \n escaped.
std::string escape_label_value(const std::string &value);

// The metrics every Kiln daemon exports: process_start_time_seconds (the process's start, in
// seconds since the Unix epoch) and kiln_build_info{component,version} (always 1).
void add_process_metrics(MetricsRegistry &registry, const std::string &component, const std::string &version);

}  // namespace kiln::rpc
