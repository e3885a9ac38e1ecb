#include "core/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace loft::metrics {
namespace {

bool ValidName(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Prometheus text escaping: backslash and newline always; double quotes
// too inside label values (not in HELP text).
std::string Escape(const std::string& s, bool quotes) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quotes && c == '"')
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& s) {
  return Escape(s, /*quotes=*/false);
}
std::string EscapeLabelValue(const std::string& s) {
  return Escape(s, /*quotes=*/true);
}

// `{a="x",b="y"}` (with an optional extra label appended), or "" if none.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra_name + "=\"" + EscapeLabelValue(extra_value) + "\"";
  }
  if (!out.empty()) out += "}";
  return out;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void Counter::Increment(double v) {
  if (!(v >= 0)) return;
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::Snap() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t acc = 0;
  s.cumulative.reserve(counts_.size());
  for (uint64_t c : counts_) {
    acc += c;
    s.cumulative.push_back(acc);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

template <typename M>
M& Family<M>::WithLabels(const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  key.resize(label_names_.size());
  std::lock_guard lock(mu_);
  auto it = children_.find(key);
  if (it == children_.end()) {
    std::unique_ptr<M> m;
    if constexpr (std::is_same_v<M, Histogram>) {
      m = std::make_unique<M>(bounds_);
    } else {
      m = std::make_unique<M>();
    }
    it = children_.emplace(std::move(key), std::move(m)).first;
  }
  return *it->second;
}

template <typename M>
void Family<M>::Render(MetricType type, std::string* out) const {
  *out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
  *out += "# TYPE " + name_ + " " + TypeName(type) + "\n";
  std::lock_guard lock(mu_);
  for (const auto& [values, m] : children_) {
    if constexpr (std::is_same_v<M, Histogram>) {
      Histogram::Snapshot s = m->Snap();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        std::string le = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
        *out += name_ + "_bucket" + LabelSet(label_names_, values, "le", le) + " " +
                std::to_string(s.cumulative[i]) + "\n";
      }
      *out += name_ + "_sum" + LabelSet(label_names_, values) + " " + FormatValue(s.sum) + "\n";
      *out += name_ + "_count" + LabelSet(label_names_, values) + " " + std::to_string(s.count) + "\n";
    } else {
      *out += name_ + LabelSet(label_names_, values) + " " + FormatValue(m->Value()) + "\n";
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

std::vector<double> DefaultMillisBuckets() {
  std::vector<double> b;
  for (double v = 0.1; v < 4000; v *= 2) b.push_back(v);
  return b;
}

StatusOr<Registry::Entry*> Registry::Declare(const std::string& name, MetricType type,
                                             const std::vector<std::string>& label_names) {
  if (!ValidName(name, /*allow_colon=*/true)) return InvalidArgument("invalid metric name '" + name + "'");
  for (const auto& l : label_names) {
    if (!ValidName(l, false) || l.rfind("__", 0) == 0 || (type == MetricType::kHistogram && l == "le")) {
      return InvalidArgument("invalid label name '" + l + "' for metric '" + name + "'");
    }
  }
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second.type != type || it->second.label_names != label_names) {
      return AlreadyExists(fmt::format("metric '{}' already declared as a {} with other labels or type", name,
                                       TypeName(it->second.type)));
    }
    return &it->second;
  }
  Entry& e = families_[name];
  e.type = type;
  e.label_names = label_names;
  return &e;
}

StatusOr<CounterFamily*> Registry::AddCounter(const std::string& name, const std::string& help,
                                              std::vector<std::string> label_names) {
  std::lock_guard lock(mu_);
  LOFT_ASSIGN_OR_RETURN(Entry * e, Declare(name, MetricType::kCounter, label_names));
  if (!e->counter) e->counter.reset(new CounterFamily(name, help, std::move(label_names)));
  return e->counter.get();
}

StatusOr<GaugeFamily*> Registry::AddGauge(const std::string& name, const std::string& help,
                                          std::vector<std::string> label_names) {
  std::lock_guard lock(mu_);
  LOFT_ASSIGN_OR_RETURN(Entry * e, Declare(name, MetricType::kGauge, label_names));
  if (!e->gauge) e->gauge.reset(new GaugeFamily(name, help, std::move(label_names)));
  return e->gauge.get();
}

StatusOr<HistogramFamily*> Registry::AddHistogram(const std::string& name, const std::string& help,
                                                  std::vector<double> bounds,
                                                  std::vector<std::string> label_names) {
  if (bounds.empty()) return InvalidArgument("histogram '" + name + "' needs at least one bucket bound");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      return InvalidArgument("histogram '" + name + "' bucket bounds must be finite and strictly increasing");
    }
  }
  std::lock_guard lock(mu_);
  LOFT_ASSIGN_OR_RETURN(Entry * e, Declare(name, MetricType::kHistogram, label_names));
  if (!e->histogram)
    e->histogram.reset(new HistogramFamily(name, help, std::move(label_names), std::move(bounds)));
  return e->histogram.get();
}

std::string Registry::Render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, e] : families_) {
    switch (e.type) {
      case MetricType::kCounter: e.counter->Render(e.type, &out); break;
      case MetricType::kGauge: e.gauge->Render(e.type, &out); break;
      case MetricType::kHistogram: e.histogram->Render(e.type, &out); break;
    }
  }
  return out;
}

}  // namespace loft::metrics
