#include "kube/workqueue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.hpp"

namespace tightrope::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Only a guard against a hung test; no test relies on how long anything takes.
constexpr auto kSafety = seconds(10);

WorkQueueOptions with_clock(FakeClock& clock) {
  WorkQueueOptions options;
  options.clock = &clock;
  return options;
}

// Spins until `clock` has `n` threads waiting on it; false if that does not happen in kSafety.
bool await_waiters(const FakeClock& clock, int n) {
  const auto give_up = std::chrono::steady_clock::now() + kSafety;
  while (clock.waiters() != n) {
    if (std::chrono::steady_clock::now() > give_up) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

TEST(WorkQueue, GivesKeysInTheOrderTheyWereAdded) {
  WorkQueue q;
  q.add("a");
  q.add("b");
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.get(), "b");
}

TEST(WorkQueue, GivesAKeyAddedTwiceOnce) {
  WorkQueue q;
  q.add("a");
  q.add("a");
  EXPECT_EQ(q.len(), 1U);
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.len(), 0U);
}

TEST(WorkQueue, HoldsAKeyAddedWhileProcessingUntilDone) {
  WorkQueue q;
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  q.add("a");
  q.add("a");
  EXPECT_EQ(q.len(), 0U);
  q.done("a");
  EXPECT_EQ(q.len(), 1U);
  EXPECT_EQ(q.get(), "a");
}

TEST(WorkQueue, DoesNotRequeueAKeyThatWasNotAddedWhileProcessing) {
  WorkQueue q;
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  q.done("a");
  EXPECT_EQ(q.len(), 0U);
}

TEST(WorkQueue, IgnoresDoneForAKeyNotProcessing) {
  WorkQueue q;
  q.add("a");
  q.done("a");
  q.done("b");
  EXPECT_EQ(q.len(), 1U);
}

TEST(WorkQueue, HandsAKeyToOneWorkerAtATimeAndLosesNoAdd) {
  constexpr int kKeys = 10;
  constexpr int kWorkers = 4;
  constexpr int kAddsPerProducer = 5000;
  WorkQueue q;
  std::array<std::atomic<int>, kKeys> in_flight{};
  std::array<std::atomic<int>, kKeys> version{};
  std::atomic<int> overlaps{0};
  std::mutex mu;
  std::condition_variable seen_cv;
  std::array<int, kKeys> seen{};  // the highest version a worker saw after get(), under mu

  std::vector<std::thread> workers;
  workers.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.get()) {
        const int k = std::stoi(*key);
        if (in_flight[k].fetch_add(1) != 0) {
          ++overlaps;
        }
        const int v = version[k].load();
        std::this_thread::yield();
        in_flight[k].fetch_sub(1);
        {
          std::lock_guard lock(mu);
          seen[k] = std::max(seen[k], v);
        }
        seen_cv.notify_all();
        q.done(*key);
      }
    });
  }
  std::vector<std::thread> producers;
  producers.reserve(2);
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        const int k = (i * 7 + p) % kKeys;
        ++version[k];
        q.add(std::to_string(k));
      }
    });
  }
  for (auto& t : producers) {
    t.join();
  }
  {
    std::unique_lock lock(mu);
    const bool all_seen = seen_cv.wait_for(lock, kSafety, [&] {
      for (int k = 0; k < kKeys; ++k) {
        if (seen[k] != version[k].load()) {
          return false;
        }
      }
      return true;
    });
    EXPECT_TRUE(all_seen) << "an add was lost";
  }
  q.shut_down();
  for (auto& t : workers) {
    t.join();
  }
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(WorkQueue, AddsDelayedKeysInTheOrderOfTheirTimes) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("late", milliseconds(20));
  q.add_after("early", milliseconds(10));
  EXPECT_EQ(q.len(), 0U);
  clock.advance(milliseconds(9));
  EXPECT_EQ(q.len(), 0U);
  clock.advance(milliseconds(1));
  ASSERT_EQ(q.len(), 1U);
  EXPECT_EQ(q.get(), "early");
  clock.advance(milliseconds(10));
  ASSERT_EQ(q.len(), 1U);
  EXPECT_EQ(q.get(), "late");
}

TEST(WorkQueue, AddsKeysDueAtTheSameTimeInTheOrderTheyWereGiven) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("b", milliseconds(10));
  q.add_after("a", milliseconds(10));
  clock.advance(milliseconds(10));
  EXPECT_EQ(q.get(), "b");
  EXPECT_EQ(q.get(), "a");
}

TEST(WorkQueue, KeepsTheEarliestTimeOfADelayedKey) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("a", milliseconds(30));
  q.add_after("a", milliseconds(10));
  q.add_after("a", milliseconds(20));
  clock.advance(milliseconds(10));
  ASSERT_EQ(q.len(), 1U);
  ASSERT_EQ(q.get(), "a");
  q.done("a");
  clock.advance(milliseconds(30));
  EXPECT_EQ(q.len(), 0U);
}

TEST(WorkQueue, DoesNotQueueADelayedKeyThatIsQueuedAlready) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add("a");
  q.add_after("a", milliseconds(10));
  clock.advance(milliseconds(10));
  EXPECT_EQ(q.len(), 1U);
}

TEST(WorkQueue, AddsAKeyWithNoDelayAtOnce) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("a", milliseconds(0));
  q.add_after("b", milliseconds(-5));
  EXPECT_EQ(q.len(), 2U);
}

TEST(WorkQueue, WakesAGetterWaitingForADelayedKeyWhenItsTimeComes) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("a", milliseconds(10));
  auto got = std::async(std::launch::async, [&q] { return q.get(); });
  ASSERT_TRUE(await_waiters(clock, 1));
  clock.advance(milliseconds(10));
  ASSERT_EQ(got.wait_for(kSafety), std::future_status::ready);
  EXPECT_EQ(got.get(), "a");
}

TEST(WorkQueue, WakesAGetterWaitingForALaterKeyWhenAnEarlierOneIsAdded) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("later", seconds(60));
  auto got = std::async(std::launch::async, [&q] { return q.get(); });
  ASSERT_TRUE(await_waiters(clock, 1));
  q.add("now");
  ASSERT_EQ(got.wait_for(kSafety), std::future_status::ready);
  EXPECT_EQ(got.get(), "now");
}

TEST(WorkQueue, DelaysARateLimitedKeyByItsBackoff) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_rate_limited("a");
  EXPECT_EQ(q.failures("a"), 1);
  clock.advance(milliseconds(4));
  EXPECT_EQ(q.len(), 0U);
  clock.advance(milliseconds(1));
  ASSERT_EQ(q.len(), 1U);
  ASSERT_EQ(q.get(), "a");
  q.done("a");
  q.add_rate_limited("a");
  EXPECT_EQ(q.failures("a"), 2);
  clock.advance(milliseconds(9));
  EXPECT_EQ(q.len(), 0U);
  clock.advance(milliseconds(1));
  EXPECT_EQ(q.len(), 1U);
}

TEST(WorkQueue, ForgetStartsTheBackoffOver) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_rate_limited("a");
  q.add_rate_limited("a");
  q.forget("a");
  EXPECT_EQ(q.failures("a"), 0);
}

TEST(WorkQueue, DelaysARateLimitedKeyByTheOverallLimitWhenThatIsLonger) {
  FakeClock clock;
  WorkQueueOptions options = with_clock(clock);
  options.per_second = 1;
  options.burst = 1;
  WorkQueue q(options);
  q.add_rate_limited("a");
  q.add_rate_limited("b");  // its own backoff is 5 ms; the bucket has no token for a second
  clock.advance(milliseconds(5));
  EXPECT_EQ(q.len(), 1U);
  clock.advance(milliseconds(995));
  EXPECT_EQ(q.len(), 2U);
}

TEST(WorkQueue, WakesEveryWaitingGetterOnShutdown) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  // A far delayed key makes the getters wait through the clock, where the test can see them.
  q.add_after("later", seconds(60));
  auto first = std::async(std::launch::async, [&q] { return q.get(); });
  auto second = std::async(std::launch::async, [&q] { return q.get(); });
  ASSERT_TRUE(await_waiters(clock, 2));
  q.shut_down();
  ASSERT_EQ(first.wait_for(kSafety), std::future_status::ready);
  ASSERT_EQ(second.wait_for(kSafety), std::future_status::ready);
  EXPECT_EQ(first.get(), std::nullopt);
  EXPECT_EQ(second.get(), std::nullopt);
  EXPECT_TRUE(q.shutting_down());
}

TEST(WorkQueue, IgnoresAddsAndDropsDelayedKeysAfterShutdown) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("a", milliseconds(10));
  q.shut_down();
  q.add("b");
  clock.advance(milliseconds(10));
  EXPECT_EQ(q.len(), 0U);
  EXPECT_EQ(q.get(), std::nullopt);
}

TEST(WorkQueue, SendsWaitingGettersAwayWhilePausedAndKeepsWhatIsAddedForTheNextOnes) {
  FakeClock clock;
  WorkQueue q(with_clock(clock));
  q.add_after("later", seconds(60));
  auto getter = std::async(std::launch::async, [&q] { return q.get(); });
  ASSERT_TRUE(await_waiters(clock, 1));
  q.pause();
  ASSERT_EQ(getter.wait_for(kSafety), std::future_status::ready);
  EXPECT_EQ(getter.get(), std::nullopt);
  q.add("meanwhile");
  clock.advance(seconds(60));
  EXPECT_EQ(q.get(), std::nullopt);
  EXPECT_FALSE(q.shutting_down());
  q.resume();
  EXPECT_EQ(q.get(), "meanwhile");
  EXPECT_EQ(q.get(), "later");
}

TEST(WorkQueue, RejectsOptionsOutOfRange) {
  WorkQueueOptions options;
  options.burst = 0;
  EXPECT_THROW(WorkQueue{options}, std::invalid_argument);
}

// The lines of the rendered registry that start with `sample`.
std::string lines_of(const metrics::Registry& registry, const std::string& sample) {
  std::string out;
  const std::string text = registry.render();
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    if (line.starts_with(sample)) {
      out += line + '\n';
    }
    start = end + 1;
  }
  return out;
}

TEST(WorkQueueMetrics, CountAddsRetriesAndDepthUnderTheQueueName) {
  FakeClock clock;
  metrics::Registry registry;
  WorkQueueOptions options = with_clock(clock);
  options.name = "nodeset";
  options.metrics = &registry;
  WorkQueue q(options);
  q.add("a");
  q.add("a");  // not an add: it is queued already
  q.add("b");
  q.add_rate_limited("c");
  EXPECT_EQ(lines_of(registry, "workqueue_depth{"), "workqueue_depth{name=\"nodeset\"} 2\n");
  EXPECT_EQ(lines_of(registry, "workqueue_adds_total{"),
            "workqueue_adds_total{name=\"nodeset\"} 2\n");
  EXPECT_EQ(lines_of(registry, "workqueue_retries_total{"),
            "workqueue_retries_total{name=\"nodeset\"} 1\n");
  ASSERT_EQ(q.get(), "a");
  EXPECT_EQ(lines_of(registry, "workqueue_depth{"), "workqueue_depth{name=\"nodeset\"} 1\n");
}

TEST(WorkQueueMetrics, TimeTheWaitInTheQueueAndTheWork) {
  FakeClock clock;
  metrics::Registry registry;
  WorkQueueOptions options = with_clock(clock);
  options.name = "q";
  options.metrics = &registry;
  WorkQueue q(options);
  q.add("a");
  clock.advance(milliseconds(250));
  ASSERT_EQ(q.get(), "a");
  clock.advance(milliseconds(500));
  q.done("a");
  EXPECT_EQ(lines_of(registry, "workqueue_queue_duration_seconds_sum"),
            "workqueue_queue_duration_seconds_sum{name=\"q\"} 0.25\n");
  EXPECT_EQ(lines_of(registry, "workqueue_work_duration_seconds_sum"),
            "workqueue_work_duration_seconds_sum{name=\"q\"} 0.5\n");
  EXPECT_EQ(lines_of(registry, "workqueue_work_duration_seconds_bucket{name=\"q\",le=\"1\"}"),
            "workqueue_work_duration_seconds_bucket{name=\"q\",le=\"1\"} 1\n");
  EXPECT_EQ(lines_of(registry, "workqueue_work_duration_seconds_bucket{name=\"q\",le=\"0.1\"}"),
            "workqueue_work_duration_seconds_bucket{name=\"q\",le=\"0.1\"} 0\n");
}

TEST(WorkQueueMetrics, ShareFamiliesBetweenQueuesWithOneChildEach) {
  metrics::Registry registry;
  WorkQueueOptions options;
  options.metrics = &registry;
  options.name = "one";
  WorkQueue one(options);
  options.name = "two";
  WorkQueue two(options);
  one.add("a");
  EXPECT_EQ(lines_of(registry, "workqueue_adds_total{"),
            "workqueue_adds_total{name=\"one\"} 1\n"
            "workqueue_adds_total{name=\"two\"} 0\n");
}

TEST(ItemBackoff, DoublesTheDelayWithEachFailure) {
  ItemBackoff backoff(milliseconds(5), seconds(1000));
  EXPECT_EQ(backoff.next("a"), milliseconds(5));
  EXPECT_EQ(backoff.next("a"), milliseconds(10));
  EXPECT_EQ(backoff.next("a"), milliseconds(20));
  EXPECT_EQ(backoff.next("a"), milliseconds(40));
  EXPECT_EQ(backoff.failures("a"), 4);
}

TEST(ItemBackoff, StopsAtTheCap) {
  ItemBackoff backoff(seconds(1), seconds(3));
  EXPECT_EQ(backoff.next("a"), seconds(1));
  EXPECT_EQ(backoff.next("a"), seconds(2));
  EXPECT_EQ(backoff.next("a"), seconds(3));
  EXPECT_EQ(backoff.next("a"), seconds(3));
}

TEST(ItemBackoff, StaysAtTheCapAfterVeryManyFailures) {
  ItemBackoff backoff(milliseconds(5), seconds(1000));
  for (int i = 0; i < 5000; ++i) {
    backoff.next("a");
  }
  EXPECT_EQ(backoff.next("a"), seconds(1000));
}

TEST(ItemBackoff, CountsEachKeyOnItsOwn) {
  ItemBackoff backoff(milliseconds(5), seconds(1000));
  backoff.next("a");
  backoff.next("a");
  EXPECT_EQ(backoff.next("b"), milliseconds(5));
  EXPECT_EQ(backoff.failures("b"), 1);
  EXPECT_EQ(backoff.failures("c"), 0);
}

TEST(ItemBackoff, ForgetStartsAgainAtTheBase) {
  ItemBackoff backoff(milliseconds(5), seconds(1000));
  backoff.next("a");
  backoff.next("a");
  backoff.forget("a");
  EXPECT_EQ(backoff.failures("a"), 0);
  EXPECT_EQ(backoff.next("a"), milliseconds(5));
}

TEST(ItemBackoff, NeverWaitsWithAZeroBase) {
  ItemBackoff backoff(milliseconds(0), seconds(1));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(backoff.next("a"), milliseconds(0));
  }
}

TEST(ItemBackoff, RejectsACapBelowTheBase) {
  EXPECT_THROW(ItemBackoff(seconds(2), seconds(1)), std::invalid_argument);
  EXPECT_THROW(ItemBackoff(milliseconds(-1), seconds(1)), std::invalid_argument);
}

TEST(TokenBucket, GivesTheBurstAtOnceThenOneTokenPerInterval) {
  TokenBucket bucket(10, 3);
  const Clock::TimePoint t0{};
  EXPECT_EQ(bucket.reserve(t0), milliseconds(0));
  EXPECT_EQ(bucket.reserve(t0), milliseconds(0));
  EXPECT_EQ(bucket.reserve(t0), milliseconds(0));
  EXPECT_EQ(bucket.reserve(t0), milliseconds(100));
  EXPECT_EQ(bucket.reserve(t0), milliseconds(200));
}

TEST(TokenBucket, CountsReservedTokensAgainstTheRefill) {
  TokenBucket bucket(10, 1);
  const Clock::TimePoint t0{};
  bucket.reserve(t0);
  EXPECT_EQ(bucket.reserve(t0), milliseconds(100));
  EXPECT_EQ(bucket.reserve(t0 + milliseconds(100)), milliseconds(100));
  EXPECT_EQ(bucket.reserve(t0 + milliseconds(300)), milliseconds(0));
}

TEST(TokenBucket, RefillsNoFurtherThanTheBurst) {
  TokenBucket bucket(10, 2);
  const Clock::TimePoint t0{};
  bucket.reserve(t0);
  bucket.reserve(t0);
  const Clock::TimePoint later = t0 + seconds(60);
  EXPECT_EQ(bucket.reserve(later), milliseconds(0));
  EXPECT_EQ(bucket.reserve(later), milliseconds(0));
  EXPECT_EQ(bucket.reserve(later), milliseconds(100));
}

TEST(TokenBucket, RefillsNothingWhenTimeGoesBack) {
  TokenBucket bucket(10, 1);
  const Clock::TimePoint t0 = Clock::TimePoint{} + seconds(10);
  bucket.reserve(t0);
  EXPECT_EQ(bucket.reserve(t0 - seconds(5)), milliseconds(100));
}

TEST(TokenBucket, RejectsARateOrBurstThatAllowsNothing) {
  EXPECT_THROW(TokenBucket(0, 1), std::invalid_argument);
  EXPECT_THROW(TokenBucket(1, 0), std::invalid_argument);
}

TEST(FakeClock, StandsStillUntilAdvanced) {
  FakeClock clock;
  const Clock::TimePoint start = clock.now();
  EXPECT_EQ(clock.now(), start);
  clock.advance(milliseconds(3));
  EXPECT_EQ(clock.now() - start, milliseconds(3));
}

TEST(FakeClock, ReturnsAtOnceFromAWaitForATimePassed) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  clock.wait_until(cv, lock, clock.now());
  EXPECT_EQ(clock.waiters(), 0);
}

}  // namespace
}  // namespace tightrope::kube
