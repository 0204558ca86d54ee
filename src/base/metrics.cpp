#include "base/metrics.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace tightrope::metrics {

// The header promises lock-free updates; fetch_add on these is a compare-and-swap loop.
static_assert(std::atomic<double>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

namespace {

[[noreturn]] void reject(const std::string& metric, const std::string& why) {
  throw std::invalid_argument("metric " + metric + ": " + why);
}

bool is_name_start(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}

bool is_valid_name(const std::string& s, bool colon_ok) {
  if (s.empty() || !is_name_start(s[0], colon_ok)) {
    return false;
  }
  return std::all_of(s.begin() + 1, s.end(), [colon_ok](char c) {
    return is_name_start(c, colon_ok) || (c >= '0' && c <= '9');
  });
}

std::string joined(const std::vector<std::string>& names) {
  std::string out = "(";
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : ", ") + names[i];
  }
  return out + ")";
}

void check_names(const std::string& name, const std::vector<std::string>& label_names,
                 bool histogram) {
  if (!is_valid_name(name, true)) {
    reject(name, "invalid metric name");
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!is_valid_name(label, false) || label.starts_with("__")) {
      reject(name, "invalid label name \"" + label + "\"");
    }
    // Prometheus adds `le` to every bucket sample itself.
    if (histogram && label == "le") {
      reject(name, "a histogram cannot have a label named le");
    }
    if (std::find(label_names.begin(), label_names.begin() + static_cast<std::ptrdiff_t>(i),
                  label) != label_names.begin() + static_cast<std::ptrdiff_t>(i)) {
      reject(name, "label " + label + " given twice");
    }
  }
}

// Returns the bounds without a trailing +Inf, which every histogram has implicitly.
std::vector<double> checked_bounds(std::vector<double> bounds, const std::string& metric) {
  if (!bounds.empty() && bounds.back() == std::numeric_limits<double>::infinity()) {
    bounds.pop_back();
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i])) {
      reject(metric, "a bucket bound is NaN");
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      reject(metric, "bucket bounds must be strictly increasing");
    }
  }
  return bounds;
}

// Go's strconv formatting, which Prometheus parsers expect, spells the non-finite values this way;
// finite ones in the shortest form that reads back to the same double.
void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    std::array<char, 32> buf{};
    const auto result = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    out.append(buf.data(), result.ptr);
  }
}

void append_escaped(std::string& out, const std::string& s, bool quote) {
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

// `{a="x",b="y"}`, with an extra `le` label for buckets; nothing when there are no labels at all.
void append_labels(std::string& out, const std::vector<std::string>& names,
                   const std::vector<std::string>& values, const std::string* le = nullptr) {
  if (names.empty() && le == nullptr) {
    return;
  }
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : ",") + names[i] + "=\"";
    append_escaped(out, values[i], true);
    out += '"';
  }
  if (le != nullptr) {
    out += names.empty() ? "le=\"" : ",le=\"";
    out += *le + "\"";
  }
  out += '}';
}

void append_sample(std::string& out, const std::string& name, const std::vector<std::string>& names,
                   const std::vector<std::string>& values, double value) {
  out += name;
  append_labels(out, names, values);
  out += ' ';
  append_number(out, value);
  out += '\n';
}

void append_samples(std::string& out, const std::string& name,
                    const std::vector<std::string>& names, const std::vector<std::string>& values,
                    const Counter& c) {
  append_sample(out, name, names, values, c.value());
}

void append_samples(std::string& out, const std::string& name,
                    const std::vector<std::string>& names, const std::vector<std::string>& values,
                    const Gauge& g) {
  append_sample(out, name, names, values, g.value());
}

void append_samples(std::string& out, const std::string& name,
                    const std::vector<std::string>& names, const std::vector<std::string>& values,
                    const Histogram& h) {
  const std::vector<uint64_t> cumulative = h.cumulative_counts();
  for (size_t i = 0; i < cumulative.size(); ++i) {
    std::string le;
    append_number(le,
                  i < h.bounds().size() ? h.bounds()[i] : std::numeric_limits<double>::infinity());
    out += name + "_bucket";
    append_labels(out, names, values, &le);
    out += ' ' + std::to_string(cumulative[i]) + '\n';
  }
  append_sample(out, name + "_sum", names, values, h.sum());
  // From the buckets rather than a separate counter, so that _count always equals le="+Inf".
  out += name + "_count";
  append_labels(out, names, values);
  out += ' ' + std::to_string(cumulative.back()) + '\n';
}

template <typename Metric>
const char* type_name() {
  if constexpr (std::is_same_v<Metric, Counter>) {
    return "counter";
  } else if constexpr (std::is_same_v<Metric, Gauge>) {
    return "gauge";
  } else {
    return "histogram";
  }
}

}  // namespace

void Counter::inc(double by) {
  if (by >= 0) {
    value_.fetch_add(by, std::memory_order_relaxed);
  }
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(checked_bounds(std::move(bounds), "histogram")), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  size_t bucket = bounds_.size();
  if (!std::isnan(v)) {
    bucket =
        static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  uint64_t total = 0;
  for (const auto& c : counts_) {
    total += c.load(std::memory_order_relaxed);
  }
  return total;
}

std::vector<uint64_t> Histogram::cumulative_counts() const {
  std::vector<uint64_t> out;
  out.reserve(counts_.size());
  uint64_t total = 0;
  for (const auto& c : counts_) {
    total += c.load(std::memory_order_relaxed);
    out.push_back(total);
  }
  return out;
}

template <typename Metric>
Family<Metric>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> buckets)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)) {
  // A metric without labels is one time series, which should be scraped (at zero) before
  // anything happens to it, as a plain client_golang metric is.
  if (label_names_.empty()) {
    with({});
  }
}

template <typename Metric>
Metric& Family<Metric>::with(const Labels& labels) {
  if (labels.size() != label_names_.size()) {
    reject(name_, std::to_string(labels.size()) + " label value(s) given, " +
                      std::to_string(label_names_.size()) + " expected " + joined(label_names_));
  }
  std::vector<std::string> values;
  values.reserve(label_names_.size());
  for (const std::string& label : label_names_) {
    const auto it = std::find_if(labels.begin(), labels.end(),
                                 [&label](const auto& given) { return given.first == label; });
    if (it == labels.end()) {
      reject(name_, "no value given for label " + label + ", expected " + joined(label_names_));
    }
    values.push_back(it->second);
  }
  std::lock_guard lock(mu_);
  if constexpr (std::is_same_v<Metric, Histogram>) {
    return children_.try_emplace(std::move(values), buckets_).first->second;
  } else {
    return children_.try_emplace(std::move(values)).first->second;
  }
}

template <typename Metric>
void Family<Metric>::remove(const Labels& match) {
  std::vector<std::pair<size_t, std::string>> wanted;  // (index in label_names_, value)
  for (const auto& [label, value] : match) {
    const auto it = std::find(label_names_.begin(), label_names_.end(), label);
    if (it == label_names_.end()) {
      reject(name_, "no label " + label + ", expected " + joined(label_names_));
    }
    wanted.emplace_back(static_cast<size_t>(it - label_names_.begin()), value);
  }
  std::lock_guard lock(mu_);
  std::erase_if(children_, [&](const auto& child) {
    return std::all_of(wanted.begin(), wanted.end(),
                       [&](const auto& w) { return child.first[w.first] == w.second; });
  });
}

template <typename Metric>
const char* Family<Metric>::type() const {
  return type_name<Metric>();
}

template <typename Metric>
void Family<Metric>::render(std::string& out) const {
  out += "# HELP " + name_ + ' ';
  append_escaped(out, help_, false);
  out += "\n# TYPE " + name_ + ' ' + type() + '\n';
  std::lock_guard lock(mu_);
  for (const auto& [values, metric] : children_) {
    append_samples(out, name_, label_names_, values, metric);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

template <typename Metric>
Family<Metric>& Registry::add(std::string name, std::string help,
                              std::vector<std::string> label_names, std::vector<double> buckets) {
  constexpr bool kHistogram = std::is_same_v<Metric, Histogram>;
  check_names(name, label_names, kHistogram);
  if constexpr (kHistogram) {
    buckets = checked_bounds(std::move(buckets), name);
  }
  std::lock_guard lock(mu_);
  for (const auto& family : families_) {
    if (family->name() != name) {
      continue;
    }
    auto* same = dynamic_cast<Family<Metric>*>(family.get());
    if (same == nullptr) {
      reject(name, std::string("registered as a ") + family->type() + ", asked for again as a " +
                       type_name<Metric>());
    }
    if (same->label_names() != label_names) {
      reject(name, "registered with labels " + joined(same->label_names()) +
                       ", asked for again with " + joined(label_names));
    }
    if (same->buckets() != buckets) {
      reject(name, "registered with other bucket bounds");
    }
    return *same;
  }
  auto family = std::make_unique<Family<Metric>>(std::move(name), std::move(help),
                                                 std::move(label_names), std::move(buckets));
  Family<Metric>& out = *family;
  families_.push_back(std::move(family));
  return out;
}

CounterFamily& Registry::counter(std::string name, std::string help,
                                 std::vector<std::string> label_names) {
  return add<Counter>(std::move(name), std::move(help), std::move(label_names), {});
}

GaugeFamily& Registry::gauge(std::string name, std::string help,
                             std::vector<std::string> label_names) {
  return add<Gauge>(std::move(name), std::move(help), std::move(label_names), {});
}

HistogramFamily& Registry::histogram(std::string name, std::string help,
                                     std::vector<std::string> label_names,
                                     std::vector<double> buckets) {
  return add<Histogram>(std::move(name), std::move(help), std::move(label_names),
                        std::move(buckets));
}

std::string Registry::render() const {
  // Families are never removed, so the pointers stay good after the lock: a slow scrape does not
  // hold up registration.
  std::vector<const detail::FamilyBase*> families;
  {
    std::lock_guard lock(mu_);
    families.reserve(families_.size());
    for (const auto& family : families_) {
      families.push_back(family.get());
    }
  }
  std::string out;
  for (const auto* family : families) {
    family->render(out);
  }
  return out;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    throw std::invalid_argument("exponential_buckets: need start > 0, factor > 1, count >= 1");
  }
  std::vector<double> out;
  out.reserve(static_cast<size_t>(count));
  double bound = start;
  for (int i = 0; i < count; ++i) {
    out.push_back(bound);
    bound *= factor;
  }
  return out;
}

}  // namespace tightrope::metrics
