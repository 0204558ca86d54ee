#include "base/metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tightrope::metrics {
namespace {

using ::testing::HasSubstr;

// The message of the std::invalid_argument that `f` throws.
template <typename F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

TEST(Counter, StartsAtZeroAndCountsUp) {
  Counter c;
  EXPECT_EQ(c.value(), 0);
  c.inc();
  c.inc(2.5);
  EXPECT_EQ(c.value(), 3.5);
}

TEST(Counter, IgnoresNegativeAndNaNAmounts) {
  Counter c;
  c.inc(2);
  c.inc(-1);
  c.inc(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.value(), 2);
}

TEST(Counter, LosesNoIncrementFromConcurrentThreads) {
  Counter c;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(c.value(), 40000);
}

TEST(Gauge, IsSetAndMovedBothWays) {
  Gauge g;
  g.set(10);
  g.add(-3);
  g.add(0.5);
  EXPECT_EQ(g.value(), 7.5);
}

TEST(Histogram, CountsEachObservationInTheFirstBucketThatHoldsIt) {
  Histogram h({1, 2, 4});
  h.observe(0.5);
  h.observe(1);  // a bound is inclusive
  h.observe(3);
  h.observe(100);
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{2, 2, 3, 4}));
  EXPECT_EQ(h.count(), 4U);
  EXPECT_EQ(h.sum(), 104.5);
}

TEST(Histogram, PutsNaNInTheInfBucketOnly) {
  Histogram h({1});
  h.observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{0, 1}));
}

TEST(Histogram, TakesAnExplicitInfBoundAsTheImplicitOne) {
  Histogram h({1, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.bounds(), std::vector<double>{1});
}

TEST(Histogram, RejectsBoundsOutOfOrder) {
  EXPECT_THROW(Histogram({2, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({1, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({std::numeric_limits<double>::quiet_NaN()}), std::invalid_argument);
}

TEST(ExponentialBuckets, MultipliesFromTheStart) {
  EXPECT_EQ(exponential_buckets(0.5, 2, 4), (std::vector<double>{0.5, 1, 2, 4}));
}

TEST(ExponentialBuckets, RejectsBucketsThatDoNotGrow) {
  EXPECT_THROW(exponential_buckets(0, 2, 3), std::invalid_argument);
  EXPECT_THROW(exponential_buckets(1, 1, 3), std::invalid_argument);
  EXPECT_THROW(exponential_buckets(1, 2, 0), std::invalid_argument);
}

TEST(Registry, RendersACounterFamilyWithLabels) {
  Registry r;
  auto& requests = r.counter("http_requests_total", "Requests served.", {"method", "code"});
  requests.with({{"method", "GET"}, {"code", "200"}}).inc(3);
  requests.with({{"method", "POST"}, {"code", "500"}}).inc();
  EXPECT_EQ(r.render(),
            "# HELP http_requests_total Requests served.\n"
            "# TYPE http_requests_total counter\n"
            "http_requests_total{method=\"GET\",code=\"200\"} 3\n"
            "http_requests_total{method=\"POST\",code=\"500\"} 1\n");
}

TEST(Registry, RendersAFamilyWithoutLabelsAtZeroBeforeAnyUse) {
  Registry r;
  r.gauge("up", "Whether the operator runs.", {});
  EXPECT_EQ(r.render(),
            "# HELP up Whether the operator runs.\n"
            "# TYPE up gauge\n"
            "up 0\n");
}

TEST(Registry, RendersOnlyTheHeaderOfALabelledFamilyWithNoChildren) {
  Registry r;
  r.counter("jobs_total", "Jobs seen.", {"partition"});
  EXPECT_EQ(r.render(),
            "# HELP jobs_total Jobs seen.\n"
            "# TYPE jobs_total counter\n");
}

TEST(Registry, RendersAHistogramWithCumulativeBucketsSumAndCount) {
  Registry r;
  auto& latency = r.histogram("latency_seconds", "Latency.", {"op"}, {0.1, 1});
  auto& read = latency.with({{"op", "read"}});
  read.observe(0.25);
  read.observe(0.5);
  read.observe(4);
  EXPECT_EQ(r.render(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{op=\"read\",le=\"0.1\"} 0\n"
            "latency_seconds_bucket{op=\"read\",le=\"1\"} 2\n"
            "latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 3\n"
            "latency_seconds_sum{op=\"read\"} 4.75\n"
            "latency_seconds_count{op=\"read\"} 3\n");
}

TEST(Registry, RendersAHistogramWithoutLabels) {
  Registry r;
  r.histogram("poll_seconds", "Poll time.", {}, {1}).with({}).observe(2);
  EXPECT_EQ(r.render(),
            "# HELP poll_seconds Poll time.\n"
            "# TYPE poll_seconds histogram\n"
            "poll_seconds_bucket{le=\"1\"} 0\n"
            "poll_seconds_bucket{le=\"+Inf\"} 1\n"
            "poll_seconds_sum 2\n"
            "poll_seconds_count 1\n");
}

TEST(Registry, RendersFamiliesInRegistrationOrderAndChildrenSortedByLabels) {
  Registry r;
  auto& zebra = r.gauge("zebra", "Z.", {"k"});
  r.gauge("alpha", "A.", {}).with({}).set(1);
  zebra.with({{"k", "b"}}).set(2);
  zebra.with({{"k", "a"}}).set(1);
  EXPECT_EQ(r.render(),
            "# HELP zebra Z.\n"
            "# TYPE zebra gauge\n"
            "zebra{k=\"a\"} 1\n"
            "zebra{k=\"b\"} 2\n"
            "# HELP alpha A.\n"
            "# TYPE alpha gauge\n"
            "alpha 1\n");
}

TEST(Registry, RendersNumbersInTheShortestFormAndSpecialValuesAsPrometheusSpellsThem) {
  Registry r;
  auto& g = r.gauge("g", "G.", {"v"});
  g.with({{"v", "a"}}).set(0.1);
  g.with({{"v", "b"}}).set(1e6);
  g.with({{"v", "c"}}).set(-2.5);
  g.with({{"v", "d"}}).set(std::numeric_limits<double>::infinity());
  g.with({{"v", "e"}}).set(-std::numeric_limits<double>::infinity());
  g.with({{"v", "f"}}).set(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(r.render(),
            "# HELP g G.\n"
            "# TYPE g gauge\n"
            "g{v=\"a\"} 0.1\n"
            "g{v=\"b\"} 1e+06\n"
            "g{v=\"c\"} -2.5\n"
            "g{v=\"d\"} +Inf\n"
            "g{v=\"e\"} -Inf\n"
            "g{v=\"f\"} NaN\n");
}

TEST(Registry, EscapesBackslashQuoteAndNewlineInLabelValues) {
  Registry r;
  r.counter("c", "C.", {"path"}).with({{"path", "a\\b\"c\nd"}}).inc();
  EXPECT_EQ(r.render(),
            "# HELP c C.\n"
            "# TYPE c counter\n"
            "c{path=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(Registry, EscapesBackslashAndNewlineButNotQuotesInHelp) {
  Registry r;
  r.counter("c", "a \"b\"\\\nc", {});
  EXPECT_EQ(r.render(),
            "# HELP c a \"b\"\\\\\\nc\n"
            "# TYPE c counter\n"
            "c 0\n");
}

TEST(Registry, ReturnsTheSameFamilyForTheSameRegistration) {
  Registry r;
  auto& first = r.counter("jobs_total", "Jobs.", {"partition"});
  auto& second = r.counter("jobs_total", "Other help.", {"partition"});
  EXPECT_EQ(&first, &second);
  first.with({{"partition", "gpu"}}).inc();
  EXPECT_EQ(second.with({{"partition", "gpu"}}).value(), 1);
  EXPECT_THAT(r.render(), HasSubstr("# HELP jobs_total Jobs.\n"));
}

TEST(Registry, RejectsANameRegisteredAgainAsAnotherType) {
  Registry r;
  r.counter("jobs_total", "Jobs.", {});
  EXPECT_THAT(rejection([&r] { r.gauge("jobs_total", "Jobs.", {}); }), HasSubstr("jobs_total"));
}

TEST(Registry, RejectsANameRegisteredAgainWithOtherLabels) {
  Registry r;
  r.counter("jobs_total", "Jobs.", {"partition", "state"});
  EXPECT_THAT(rejection([&r] { r.counter("jobs_total", "Jobs.", {"partition"}); }),
              HasSubstr("jobs_total"));
  EXPECT_THROW(r.counter("jobs_total", "Jobs.", {"state", "partition"}), std::invalid_argument);
}

TEST(Registry, RejectsAHistogramRegisteredAgainWithOtherBuckets) {
  Registry r;
  r.histogram("h", "H.", {}, {1, 2});
  EXPECT_EQ(&r.histogram("h", "H.", {}, {1, 2, std::numeric_limits<double>::infinity()}),
            &r.histogram("h", "H.", {}, {1, 2}));
  EXPECT_THAT(rejection([&r] { r.histogram("h", "H.", {}, {1, 3}); }), HasSubstr("metric h:"));
}

TEST(Registry, RejectsInvalidMetricNames) {
  Registry r;
  EXPECT_THAT(rejection([&r] { r.counter("1jobs", "", {}); }), HasSubstr("1jobs"));
  EXPECT_THROW(r.counter("", "", {}), std::invalid_argument);
  EXPECT_THROW(r.counter("jobs-total", "", {}), std::invalid_argument);
  EXPECT_NO_THROW(r.counter("slurm:jobs_total", "", {}));
}

TEST(Registry, RejectsInvalidLabelNames) {
  Registry r;
  EXPECT_THAT(rejection([&r] { r.counter("c", "", {"a:b"}); }), HasSubstr("metric c:"));
  EXPECT_THROW(r.counter("c", "", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(r.counter("c", "", {"9"}), std::invalid_argument);
  EXPECT_THROW(r.counter("c", "", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(r.histogram("h", "", {"le"}, {1}), std::invalid_argument);
  EXPECT_NO_THROW(r.counter("c", "", {"le"}));
}

TEST(Family, RejectsTheWrongNumberOfLabelValuesNamingTheMetric) {
  Registry r;
  auto& jobs = r.counter("jobs_total", "Jobs.", {"partition", "state"});
  EXPECT_THAT(rejection([&jobs] { jobs.with({{"partition", "gpu"}}); }), HasSubstr("jobs_total"));
  EXPECT_THROW(jobs.with({}), std::invalid_argument);
}

TEST(Family, RejectsALabelNameItDoesNotHave) {
  Registry r;
  auto& jobs = r.counter("jobs_total", "Jobs.", {"partition"});
  EXPECT_THAT(rejection([&jobs] { jobs.with({{"queue", "gpu"}}); }), HasSubstr("jobs_total"));
}

TEST(Family, RemovesTheChildrenThatMatchAndKeepsTheOthers) {
  Registry r;
  auto& nodes = r.gauge("nodeset_nodes", "Nodes.", {"namespace", "nodeset", "state"});
  nodes.with({{"namespace", "a"}, {"nodeset", "cpu"}, {"state", "idle"}}).set(2);
  nodes.with({{"namespace", "a"}, {"nodeset", "cpu"}, {"state", "down"}}).set(1);
  nodes.with({{"namespace", "a"}, {"nodeset", "gpu"}, {"state", "idle"}}).set(4);
  nodes.with({{"namespace", "b"}, {"nodeset", "cpu"}, {"state", "idle"}}).set(8);
  nodes.remove({{"nodeset", "cpu"}, {"namespace", "a"}});
  EXPECT_EQ(r.render(),
            "# HELP nodeset_nodes Nodes.\n"
            "# TYPE nodeset_nodes gauge\n"
            "nodeset_nodes{namespace=\"a\",nodeset=\"gpu\",state=\"idle\"} 4\n"
            "nodeset_nodes{namespace=\"b\",nodeset=\"cpu\",state=\"idle\"} 8\n");
  EXPECT_THAT(rejection([&nodes] {
                nodes.remove({{"partition", "x"}});
              }),
              HasSubstr("nodeset_nodes"));
}

TEST(Family, FindsTheSameChildWhateverTheOrderOfTheLabels) {
  Registry r;
  auto& jobs = r.counter("jobs_total", "Jobs.", {"partition", "state"});
  EXPECT_EQ(&jobs.with({{"partition", "gpu"}, {"state", "running"}}),
            &jobs.with({{"state", "running"}, {"partition", "gpu"}}));
}

TEST(Family, KeepsChildReferencesValidAsChildrenAreAdded) {
  Registry r;
  auto& jobs = r.counter("jobs_total", "Jobs.", {"partition"});
  Counter& first = jobs.with({{"partition", "m"}});
  for (int i = 0; i < 1000; ++i) {
    jobs.with({{"partition", std::to_string(i)}});
  }
  first.inc();
  EXPECT_EQ(&jobs.with({{"partition", "m"}}), &first);
  EXPECT_EQ(jobs.with({{"partition", "m"}}).value(), 1);
}

TEST(Family, MakesChildrenSafelyFromConcurrentThreads) {
  Registry r;
  auto& jobs = r.counter("jobs_total", "Jobs.", {"partition"});
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&jobs] {
      for (int i = 0; i < 1000; ++i) {
        jobs.with({{"partition", std::to_string(i % 10)}}).inc();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(jobs.with({{"partition", std::to_string(i)}}).value(), 400);
  }
}

}  // namespace
}  // namespace tightrope::metrics
