// Metrics: counters, gauges and histograms with labels, rendered in the
// Prometheus text exposition format (version 0.0.4).
//
// There is no global registry: a daemon owns a Registry and passes it (or
// the metrics it created) to the parts that record. A family is declared
// once with its name, help text and label names; each distinct tuple of
// label values is one child time series, created on first use.
//
//   Registry reg;
//   auto dropped = reg.AddCounter("loft_agent_dropped_total", "Frames dropped.", {"reason"});
//   (*dropped)->WithLabels({"oversized"}).Increment();
//   std::string text = reg.Render();
//
// Not responsible for: serving the text over HTTP (core/metrics_http.h).
// Thread-safety: everything here is thread-safe. Pointers and references
// returned stay valid for the Registry's lifetime.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace loft::metrics {

class Counter {
 public:
  // `v` must be >= 0; negative increments are ignored (counters only go up).
  void Increment(double v = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: strictly increasing finite upper bounds (checked by the family).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (size bounds+1)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Snap() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // non-cumulative, size bounds+1
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// One metric family: name, help, label names, and its children.
template <typename M>
class Family {
 public:
  // `values` must have one entry per label name (missing ones are taken as
  // "", extra ones are dropped; both are programming errors).
  M& WithLabels(const std::vector<std::string>& values);
  // The child without labels (families declared without label names).
  M& Get() { return WithLabels({}); }

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}
  void Render(MetricType type, std::string* out) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Bucket bounds for latencies in milliseconds: 0.1 ms … ~3.3 s, x2 apart.
std::vector<double> DefaultMillisBuckets();

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Declares a family. Errors: invalid metric or label name
  // (InvalidArgument); the name already declared with another type or
  // other label names (AlreadyExists). Declaring the same family again
  // with the same type and labels returns the existing one.
  StatusOr<CounterFamily*> AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names = {});
  StatusOr<GaugeFamily*> AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names = {});
  // `bounds` strictly increasing and finite, at least one.
  StatusOr<HistogramFamily*> AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<double> bounds,
                                          std::vector<std::string> label_names = {});

  // The text exposition: families in name order, children in label order.
  std::string Render() const;

 private:
  struct Entry {
    MetricType type;
    std::vector<std::string> label_names;
    std::unique_ptr<CounterFamily> counter;
    std::unique_ptr<GaugeFamily> gauge;
    std::unique_ptr<HistogramFamily> histogram;
  };
  StatusOr<Entry*> Declare(const std::string& name, MetricType type,
                           const std::vector<std::string>& label_names);

  mutable std::mutex mu_;
  std::map<std::string, Entry> families_;
};

// Formats a sample value as Prometheus does: "+Inf", "-Inf", "NaN",
// integers without a decimal point, others in shortest round-trip form.
std::string FormatValue(double v);

}  // namespace loft::metrics
