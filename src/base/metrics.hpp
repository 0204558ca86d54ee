// Prometheus metrics: counters, gauges and histograms with labels, kept in a registry that renders
// them in the text exposition format (version 0.0.4) for a /metrics endpoint. Knows nothing of
// HTTP or of what is measured; depends on the standard library only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tightrope::metrics {

// Label name -> value. Families accept the names in any order; they render in the family's order.
using Labels = std::vector<std::pair<std::string, std::string>>;

// `labels` and one more: a child's labels from its parent's.
inline Labels plus(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

// All metric operations are thread-safe. Updates are lock-free.
class Counter {
 public:
  // A counter only goes up (Prometheus reads a drop as a restart), so amounts that are negative
  // or NaN are ignored rather than thrown about on a hot path.
  void inc(double by = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // Upper bounds, strictly increasing; a last bound of +Inf may be given or left implied. Throws
  // std::invalid_argument for NaN or bounds out of order.
  explicit Histogram(std::vector<double> bounds);

  // A value falls in the first bucket whose bound is >= it; NaN only in +Inf.
  void observe(double v);
  uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  // One count per bound plus the last for +Inf, each including those before it.
  std::vector<uint64_t> cumulative_counts() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;  // per bucket, not cumulative: one add per observe
  std::atomic<double> sum_{0};
};

namespace detail {
// What the registry needs of a family, whatever its metric type.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual const std::string& name() const = 0;
  virtual const char* type() const = 0;
  virtual void render(std::string& out) const = 0;
};
}  // namespace detail

// One metric name with its children, one per set of label values. Made by a Registry.
template <typename Metric>
class Family final : public detail::FamilyBase {
 public:
  // Made by Registry, which checks the names and `buckets` (which matter only to histograms).
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> buckets);

  // The child for these label values, made at first use. The reference stays valid as long as
  // the family does. Throws std::invalid_argument, naming the metric, unless the label names are
  // exactly the family's (in any order).
  Metric& with(const Labels& labels);
  // Drops every child whose labels include all of `match` (a subset of the family's label names,
  // else std::invalid_argument): the series of something that is gone. References to a dropped
  // child are invalid afterwards.
  void remove(const Labels& match);

  const std::string& name() const override { return name_; }
  const char* type() const override;
  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::vector<double>& buckets() const { return buckets_; }
  void render(std::string& out) const override;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::vector<double> buckets_;
  mutable std::mutex mu_;
  // Keyed by the values in label_names_ order, which is also the render order. Map nodes never
  // move, so references handed out stay valid.
  std::map<std::vector<std::string>, Metric> children_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Families live as long as the registry. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label
// names [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__"; "le" is taken in histograms). A family
// without labels has its one child, at zero, from the start.
//
// Registering a name again with the same type, label names (same order) and buckets returns the
// family already there (the first help text stays); anything else throws std::invalid_argument
// naming the metric, as do invalid names.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names);
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names);
  HistogramFamily& histogram(std::string name, std::string help,
                             std::vector<std::string> label_names, std::vector<double> buckets);

  // Families in registration order, children sorted by label values.
  std::string render() const;

 private:
  template <typename Metric>
  Family<Metric>& add(std::string name, std::string help, std::vector<std::string> label_names,
                      std::vector<double> buckets);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<detail::FamilyBase>> families_;
};

// `count` bounds: start, start*factor, ... Throws std::invalid_argument unless start > 0,
// factor > 1 and count >= 1.
std::vector<double> exponential_buckets(double start, double factor, int count);

}  // namespace tightrope::metrics
