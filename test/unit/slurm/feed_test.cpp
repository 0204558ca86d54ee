#include "slurm/feed.hpp"

#include <gtest/gtest.h>

namespace tightrope::slurm {
namespace {

Node node(const std::string& name, std::vector<std::string> state = {"IDLE"}) {
  Node n;
  n.name = name;
  n.state = std::move(state);
  return n;
}

std::map<std::string, Node> nodes(std::initializer_list<Node> list) {
  std::map<std::string, Node> out;
  for (const auto& n : list) {
    out.emplace(n.name, n);
  }
  return out;
}

TEST(DiffNodes, IdenticalSnapshotsHaveNoEvents) {
  EXPECT_TRUE(diff_nodes(nodes({node("a"), node("b")}), nodes({node("a"), node("b")})).empty());
}

TEST(DiffNodes, ReportsAddedChangedAndRemovedInNameOrder) {
  const auto events = diff_nodes(nodes({node("a"), node("b"), node("d")}),
                                 nodes({node("b", {"IDLE", "DRAIN"}), node("c"), node("d")}));
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[0].type, NodeEvent::Type::kRemoved);
  EXPECT_EQ(events[0].node.name, "a");
  EXPECT_EQ(events[1].type, NodeEvent::Type::kChanged);
  EXPECT_EQ(events[1].node.name, "b");
  EXPECT_TRUE(events[1].node.drain());
  ASSERT_TRUE(events[1].previous.has_value());
  EXPECT_FALSE(events[1].previous->drain());
  EXPECT_EQ(events[2].type, NodeEvent::Type::kAdded);
  EXPECT_EQ(events[2].node.name, "c");
}

TEST(DiffNodes, AChangedReasonAloneIsAChange) {
  Node before = node("a", {"IDLE", "DRAIN"});
  Node after = before;
  after.reason = "new reason";
  EXPECT_EQ(diff_nodes(nodes({before}), nodes({after})).size(), 1U);
}

TEST(DiffNodes, EverythingIsAddedToAnEmptySnapshot) {
  const auto events = diff_nodes({}, nodes({node("a"), node("b")}));
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].type, NodeEvent::Type::kAdded);
  EXPECT_EQ(events[1].type, NodeEvent::Type::kAdded);
}

}  // namespace
}  // namespace tightrope::slurm

namespace tightrope::slurm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Time kSecond1000{seconds(1000)};

TEST(UpdateCursor, AsksForEverythingBeforeTheFirstList) {
  EXPECT_FALSE(UpdateCursor(milliseconds(500)).since().has_value());
}

TEST(UpdateCursor, ResumesFromTheSecondOfSlurmsAnswer) {
  UpdateCursor cursor(milliseconds(500));
  // Our clock is ahead of slurmctld's: its answer says which second it answered in.
  cursor.read(kSecond1000 + milliseconds(3700), true, kSecond1000 + seconds(2));
  EXPECT_EQ(cursor.since(), kSecond1000 + seconds(2))
      << "a change later in the second of the answer must still be asked for";
}

TEST(UpdateCursor, NothingChangedKeepsTheCursor) {
  UpdateCursor cursor(milliseconds(500));
  cursor.read(kSecond1000, true, kSecond1000);
  cursor.read(kSecond1000 + seconds(5), false, std::nullopt);
  EXPECT_EQ(cursor.since(), kSecond1000) << "no change since then: asking from there is exact";
}

TEST(UpdateCursor, AnAnswerWithoutItsTimeFallsBackToTheReadLessTheAllowance) {
  UpdateCursor cursor(milliseconds(500));
  cursor.read(kSecond1000 + milliseconds(1700), true, std::nullopt);
  EXPECT_EQ(cursor.since(), kSecond1000 + seconds(1));
  cursor.read(kSecond1000 + milliseconds(2300), true, std::nullopt);  // 2.3 s - 0.5 s: second 1
  EXPECT_EQ(cursor.since(), kSecond1000 + seconds(1));
}

TEST(UpdateCursor, NeverSkipsTheSecondInWhichAReadStarted) {
  UpdateCursor cursor(milliseconds(0));
  cursor.read(kSecond1000 + milliseconds(999), true, std::nullopt);
  EXPECT_EQ(cursor.since(), kSecond1000) << "a change later in that second must still be asked for";
}

TEST(NextPoll, AQuickPollIsFollowedOnePeriodAfterItsStart) {
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(next_poll_at(t0, t0 + milliseconds(30), seconds(1)), t0 + seconds(1));
}

TEST(NextPoll, ALongPollLeavesSlurmrestdAsLongAgainBeforeTheNext) {
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(next_poll_at(t0, t0 + milliseconds(2500), seconds(1)), t0 + seconds(5));
  EXPECT_EQ(next_poll_at(t0, t0 + milliseconds(700), seconds(1)), t0 + milliseconds(1400));
}

FeedOptions hinted_options() {
  FeedOptions o;
  o.period = seconds(1);
  o.hinted_period = seconds(30);
  o.busy_for = seconds(10);
  o.hint_delay = milliseconds(20);
  return o;
}

TEST(FeedPeriod, AtRestWithLiveHintsTheFeedPollsOnlyEachHintedPeriod) {
  const auto o = hinted_options();
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(feed_period(o, true, true, t0, std::nullopt), seconds(30));
  EXPECT_EQ(feed_period(o, true, true, t0, t0 - seconds(11)), seconds(30));
}

TEST(FeedPeriod, WithoutLiveHintsOrSoonAfterAChangeTheFeedPollsEachPeriod) {
  const auto o = hinted_options();
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(feed_period(o, false, true, t0, std::nullopt), seconds(1))
      << "no hints: polling is all";
  EXPECT_EQ(feed_period(o, true, true, t0, t0 - seconds(9)), seconds(1))
      << "what follows a change (a job's nodes powering up) may leave no line to hint it";
  FeedOptions unset;
  EXPECT_EQ(feed_period(unset, true, true, t0, std::nullopt), unset.period);
}

TEST(FeedPeriod, WhatSlurmMayChangeWithoutALogLineKeepsTheFeedPolling) {
  const auto o = hinted_options();
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(feed_period(o, true, false, t0, std::nullopt), seconds(1));

  SlurmSnapshot s{std::make_shared<std::map<std::string, Node>>(),
                  std::make_shared<std::map<int64_t, Job>>()};
  EXPECT_TRUE(settled(s));
  auto nodes = std::make_shared<std::map<std::string, Node>>();
  (*nodes)["n1"].state = {"IDLE"};
  (*nodes)["n2"].state = {"ALLOCATED"};
  auto jobs = std::make_shared<std::map<int64_t, Job>>();
  (*jobs)[1].state = {"RUNNING"};
  (*jobs)[2].state = {"COMPLETED"};
  EXPECT_TRUE(settled({nodes, jobs})) << "a running job's end is in the log";
  (*jobs)[3].state = {"PENDING"};
  EXPECT_FALSE(settled({nodes, jobs})) << "the backfill scheduler may start it without a line";
  jobs->erase(3);
  (*nodes)["n3"].state = {"IDLE", "CLOUD", "POWERING_DOWN"};
  EXPECT_FALSE(settled({nodes, jobs}));
}

TEST(HintedPoll, AHintAtRestIsReadAtOnceAndABurstIsOnePollAPeriod) {
  const auto o = hinted_options();
  const std::chrono::steady_clock::time_point t0{seconds(100)};
  EXPECT_EQ(hinted_poll_at(o, t0, std::nullopt), t0 + milliseconds(20));
  EXPECT_EQ(hinted_poll_at(o, t0, t0 - seconds(25)), t0 + milliseconds(20));
  EXPECT_EQ(hinted_poll_at(o, t0, t0 - milliseconds(300)), t0 + milliseconds(700))
      << "a poll started 300 ms ago: the next one a period after it";
}

TEST(ListTimeout, GrowsWithTheLastListAndStaysBounded) {
  EXPECT_EQ(list_timeout(milliseconds(0)), milliseconds(0)) << "no list yet: the client's own";
  EXPECT_EQ(list_timeout(milliseconds(2500)), milliseconds(10000));
  EXPECT_EQ(list_timeout(seconds(600)), seconds(120));
}

// Times of a JobPace, in seconds from an arbitrary start.
JobPace::Clock::time_point at(double s) {
  return JobPace::Clock::time_point(std::chrono::duration_cast<JobPace::Clock::duration>(
      std::chrono::duration<double>(1000 + s)));
}

TEST(JobPace, WithoutARestPeriodJobsAreReadInEveryPoll) {
  JobPace pace(milliseconds(0), seconds(10));
  pace.read(at(0), false);
  EXPECT_TRUE(pace.due(at(1), false, false));
}

TEST(JobPace, AtRestJobsAreReadOnlyOnceARestPeriod) {
  JobPace pace(seconds(10), seconds(5));
  EXPECT_TRUE(pace.due(at(0), false, false)) << "never read yet";
  pace.read(at(0), false);
  EXPECT_FALSE(pace.due(at(1), false, false));
  EXPECT_FALSE(pace.due(at(9.9), false, false));
  EXPECT_TRUE(pace.due(at(10), false, false));
}

TEST(JobPace, ANodeChangeIsAlwaysReadWithItsJobs) {
  JobPace pace(seconds(10), seconds(5));
  pace.read(at(0), false);
  EXPECT_TRUE(pace.due(at(1), true, false));
}

TEST(JobPace, ACallerWaitingOnSlurmGetsTheJobsInTheNextPoll) {
  JobPace pace(seconds(10), seconds(5));
  pace.read(at(0), false);
  EXPECT_TRUE(pace.due(at(1), false, true));
}

TEST(JobPace, AChangeKeepsJobsReadInEveryPollForAWhile) {
  JobPace pace(seconds(10), seconds(5));
  pace.read(at(0), true);  // a job changed
  EXPECT_TRUE(pace.due(at(4.9), false, false));
  pace.read(at(4.9), false);
  EXPECT_FALSE(pace.due(at(5.1), false, false)) << "quiet for the busy period: at rest again";
  pace.changed(at(6));  // a node changed
  EXPECT_TRUE(pace.due(at(7), false, false));
  pace.read(at(7), false);
  EXPECT_FALSE(pace.due(at(11.1), false, false));
  EXPECT_TRUE(pace.due(at(17), false, false)) << "a rest period after the last read";
}

TEST(DiffJobs, ReportsAJobThatChangedState) {
  Job before;
  before.id = 7;
  before.state = {"RUNNING"};
  Job after = before;
  after.state = {"CANCELLED"};
  const auto events = diff_jobs({{7, before}}, {{7, after}});
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].type, JobEvent::Type::kChanged);
  EXPECT_TRUE(events[0].job.has("CANCELLED"));
}

}  // namespace
}  // namespace tightrope::slurm
