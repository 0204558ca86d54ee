// slurm::ChangeFeed against the bed: what it reports and what it costs when nothing changes.
#include "slurm/feed.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "testbed.hpp"

namespace tightrope::slurm {
namespace {

using tightrope::testing::TestBed;
using namespace std::chrono_literals;

Client client(std::chrono::milliseconds timeout = 5s) {
  ClientOptions o;
  o.url = TestBed::var("SLURMRESTD_URL");
  o.timeout = timeout;
  o.max_attempts = 1;
  return {o, std::make_shared<MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm")};
}

// Collects events from the feed's thread.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<NodeEvent> events;

  void operator()(const std::vector<NodeEvent>& batch) {
    std::lock_guard lock(mu);
    events.insert(events.end(), batch.begin(), batch.end());
    cv.notify_all();
  }
  template <typename Predicate>
  bool wait_for(Predicate p, std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return std::any_of(events.begin(), events.end(), p); });
  }
};

TEST(ChangeFeed, StartsWithEveryNodeAdded) {
  Client c = client();
  ChangeFeed feed(c);
  std::vector<NodeEvent> seen;
  feed.subscribe([&](const std::vector<NodeEvent>& e) { seen = e; });
  auto first = feed.poll_once();
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->resync);
  ASSERT_EQ(seen.size(), 3U);
  for (const auto& e : seen) {
    EXPECT_EQ(e.type, NodeEvent::Type::kAdded);
  }
  EXPECT_TRUE(feed.health().synced);
}

TEST(ChangeFeed, AnIdleClusterIsAnsweredWithNotModified) {
  Client c = client();
  ChangeFeed feed(c);
  ASSERT_TRUE(feed.poll_once().ok());
  // The cursor is the second of the first answer: a change in that second (or slurmctld's own
  // bookkeeping, see docs/slurm.md) is listed once more; then only 304s.
  int listed = 0;
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(500ms);
    auto r = feed.poll_once();
    ASSERT_TRUE(r.ok()) << r.error().message;
    listed += r->listed ? 1 : 0;
    EXPECT_EQ(r->events, 0U);
  }
  EXPECT_LE(listed, 2);
  auto last = feed.poll_once();
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(last->listed);
  EXPECT_EQ(feed.requests(), 8U) << "one request per poll";
}

TEST(ChangeFeed, PollsSoonWhenAskedAndOtherwiseOnceAPeriod) {
  Client c = client();
  FeedOptions o;
  o.period = 30s;
  ChangeFeed feed(c, o);
  feed.start();
  const auto polled = [&](uint64_t n) {
    for (int i = 0; i < 200 && feed.requests() < n; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    return feed.requests() >= n;
  };
  ASSERT_TRUE(polled(1));
  const uint64_t first = feed.requests();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(feed.requests(), first) << "a poll before the period ended, unasked";
  feed.poll_soon(50ms);
  feed.poll_soon(100ms);  // the same poll
  EXPECT_TRUE(polled(first + 1));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(feed.requests(), first + 1);
  feed.stop();
}

TEST(ChangeFeed, WithLiveHintsAtRestOnlyAHintBringsAPollAndItReadsTheChange) {
  Client c = client();
  Recorder recorder;
  FeedOptions o;
  o.period = 1s;
  o.hinted_period = 60s;
  o.busy_for = 2s;
  ChangeFeed feed(c, o);
  feed.subscribe(std::ref(recorder));
  feed.hints_live(true);
  feed.start();
  for (int i = 0; i < 300 && feed.requests() == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  // busy_for after the first list's "changes" (every node added), and its last poll a period on.
  std::this_thread::sleep_for(4s);
  const uint64_t at_rest = feed.requests();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(feed.requests(), at_rest) << "at rest with live hints: no poll each period";
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n3 state=drain reason=hinted"), 0);
  feed.hint();  // read within 5 s, not the 60 s of the hinted period
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) { return e.node.name == "n3" && e.node.reason == "hinted"; }, 5s));
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n3 state=resume"), 0);
  // No hint for this one: the source went away, and the feed reads at once, then each period.
  feed.hints_live(false);
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) { return e.node.name == "n3" && !e.node.drain(); }, 3s));
  feed.stop();
}

TEST(ChangeFeed, ReportsADrainMadeWithScontrol) {
  Client c = client();
  Recorder recorder;  // outlives the feed, whose thread delivers to it until it stops
  ChangeFeed feed(c);
  feed.subscribe(std::ref(recorder));
  ASSERT_TRUE(feed.poll_once().ok());
  feed.start();
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n2 state=drain reason=feed-test"), 0);
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) {
        return e.type == NodeEvent::Type::kChanged && e.node.name == "n2" && e.node.drain() &&
               e.node.reason == "feed-test";
      },
      10s));
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n2 state=resume"), 0);
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) { return e.node.name == "n2" && !e.node.drain(); }, 10s));
  feed.stop();
}

TEST(ChangeFeed, ReportsANodeCreatedAndDeleted) {
  Client c = client();
  Recorder recorder;  // outlives the feed, whose thread delivers to it until it stops
  ChangeFeed feed(c);
  feed.subscribe(std::ref(recorder));
  ASSERT_TRUE(feed.poll_once().ok());
  feed.start();
  ASSERT_TRUE(c.create_node("NodeName=feed1 CPUs=1 RealMemory=100 Features=tb State=FUTURE").ok());
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) {
        return e.type == NodeEvent::Type::kAdded && e.node.name == "feed1";
      },
      10s));
  ASSERT_TRUE(c.delete_node("feed1").ok());
  EXPECT_TRUE(recorder.wait_for(
      [](const NodeEvent& e) {
        return e.type == NodeEvent::Type::kRemoved && e.node.name == "feed1";
      },
      10s));
  feed.stop();
}

TEST(ChangeFeed, FollowsAJobFromSubmissionToCancellation) {
  Client c = client();
  FeedOptions options;
  options.follow_jobs = true;
  // What the feed's thread writes to outlives the feed.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<JobEvent> seen;
  ChangeFeed feed(c, options);
  feed.subscribe_changes([&](const ChangeFeed::Changes& changes) {
    std::lock_guard lock(mu);
    seen.insert(seen.end(), changes.jobs.begin(), changes.jobs.end());
    cv.notify_all();
  });
  ASSERT_TRUE(feed.poll_once().ok());
  feed.start();
  JobSubmission job;
  job.name = "feed-job";
  job.partition = TestBed::var("SLURM_PARTITION");
  job.script = "#!/bin/sh\nsleep 300\n";
  job.working_directory = TestBed::var("SLURM_JOB_DIR");
  auto id = c.submit_job(job);
  ASSERT_TRUE(id.ok()) << id.error().message;
  auto has = [&](const std::string& state) {
    return [&, state] {
      return std::any_of(seen.begin(), seen.end(),
                         [&](const JobEvent& e) { return e.job.id == *id && e.job.has(state); });
    };
  };
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 10s, has("RUNNING")));
  }
  ASSERT_TRUE(c.cancel_job(*id).ok());
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 10s, has("CANCELLED")));
  }
  feed.stop();
}

TEST(ChangeFeed, AtRestReadsJobsOnlyWithANodeChangeOrWhenAsked) {
  Client c = client();
  FeedOptions options;
  options.follow_jobs = true;
  options.jobs_at_rest = 60s;
  options.busy_for = 0s;
  ChangeFeed feed(c, options);
  ASSERT_TRUE(feed.poll_once().ok());
  EXPECT_EQ(feed.requests(), 2U) << "the first poll reads nodes and jobs";
  // Until the second of the first read has passed, nodes may be listed again (with their jobs).
  for (int i = 0; i < 6 && feed.poll_once().value().listed; ++i) {
    std::this_thread::sleep_for(500ms);
  }
  const uint64_t at_rest = feed.requests();
  ASSERT_TRUE(feed.poll_once().ok());
  ASSERT_TRUE(feed.poll_once().ok());
  EXPECT_EQ(feed.requests(), at_rest + 2) << "at rest: the node list only";
  feed.poll_soon(0ms);
  ASSERT_TRUE(feed.poll_once().ok());
  EXPECT_EQ(feed.requests(), at_rest + 4) << "asked: nodes and jobs";
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n3 state=drain reason=pace-test"), 0);
  auto changed = feed.poll_once();
  ASSERT_TRUE(changed.ok());
  ASSERT_EQ(TestBed::slurm_cli("scontrol update nodename=n3 state=resume"), 0);
  EXPECT_TRUE(changed->listed);
  EXPECT_EQ(feed.requests(), at_rest + 6) << "a node change: nodes and jobs";
}

TEST(ChangeFeed, ANodeSeenBusyComesWithItsJobInTheSameSnapshot) {
  Client c = client();
  FeedOptions options;
  options.follow_jobs = true;
  options.period = 200ms;
  options.jobs_at_rest = 60s;  // jobs read only because their nodes changed
  // What the feed's thread writes to outlives the feed.
  std::mutex mu;
  std::condition_variable cv;
  bool busy_seen = false;
  std::vector<std::string> busy_without_job;
  ChangeFeed feed(c, options);
  // What a reconcile woken by this change would read: the snapshot it came with, and the feed's.
  feed.subscribe_changes([&](const ChangeFeed::Changes& changes) {
    const SlurmSnapshot now = feed.snapshot();
    EXPECT_EQ(now.nodes, changes.snapshot.nodes);
    std::lock_guard lock(mu);
    for (const auto& e : changes.nodes) {
      if (!e.node.busy()) {
        continue;
      }
      busy_seen = true;
      const bool explained = std::any_of(now.jobs->begin(), now.jobs->end(), [&](const auto& j) {
        return j.second.has("RUNNING") && j.second.nodes == e.node.name;
      });
      if (!explained) {
        busy_without_job.push_back(e.node.name);
      }
    }
    cv.notify_all();
  });
  ASSERT_TRUE(feed.poll_once().ok());
  feed.start();
  const std::string nodes = TestBed::var("SLURM_NODES");
  const std::string node = nodes.substr(0, nodes.find(','));
  JobSubmission job;
  job.name = "feed-busy";
  job.partition = TestBed::var("SLURM_PARTITION");
  job.script = "#!/bin/sh\nsleep 300\n";
  job.working_directory = TestBed::var("SLURM_JOB_DIR");
  job.required_nodes = {node};
  auto id = c.submit_job(job);
  ASSERT_TRUE(id.ok()) << id.error().message;
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return busy_seen; }));
    EXPECT_TRUE(busy_without_job.empty()) << "busy without its job: " << busy_without_job[0];
  }
  ASSERT_TRUE(c.cancel_job(*id).ok());
  feed.stop();
}

// Last: it stops and restarts the bed's slurmctld.
TEST(ChangeFeedWithoutController, ReportsTheOutageAndResyncsWhenSlurmctldReturns) {
  Client c = client(2s);
  ChangeFeed feed(c, FeedOptions{200ms, true, 500ms, 1s});
  std::mutex mu;
  std::vector<FeedHealth> health;
  feed.subscribe_health([&](const FeedHealth& h) {
    std::lock_guard lock(mu);
    health.push_back(h);
  });
  ASSERT_TRUE(feed.poll_once().ok());

  const pid_t ctld = TestBed::pid_of("slurmctld");
  ASSERT_EQ(::kill(ctld, SIGTERM), 0);
  for (int i = 0; i < 300 && !tightrope::testing::process_gone(ctld); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  auto down = feed.poll_once();
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().kind, ErrorKind::kUnavailable);
  EXPECT_FALSE(feed.health().synced);

  ASSERT_EQ(TestBed::up(), 0);
  Result<PollOutcome> back = fail(Error{});
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    back = feed.poll_once();
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->resync) << "the first answer after an outage is a full list";
  EXPECT_TRUE(feed.health().synced);
  std::lock_guard lock(mu);
  ASSERT_GE(health.size(), 3U);  // synced, failing, synced again
  EXPECT_TRUE(health.front().synced);
  EXPECT_FALSE(health[1].synced);
  EXPECT_TRUE(health.back().synced);
}

}  // namespace
}  // namespace tightrope::slurm
