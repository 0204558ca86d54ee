// The executor's order, with a fake writer: what runs before what, what a failure skips, and
// how pod creations start slowly.
#include "operator/nodeset_execute.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tightrope::op {
namespace {

// Records every write in order; fails those whose description is in `failing`.
struct FakeWriter final : ActionWriter {
  std::mutex mu;
  std::vector<std::string> written;
  std::vector<std::string> recorded;
  std::set<std::string> failing;

  std::optional<std::string> write(const Action& a) override {
    std::lock_guard lock(mu);
    const std::string what = to_string(a.change);
    written.push_back(what);
    if (failing.count(what) != 0) {
      return "refused";
    }
    return std::nullopt;
  }
  void succeeded(const Action& a) override {
    std::lock_guard lock(mu);
    recorded.push_back(to_string(a.change));
  }
  size_t index_of(const std::string& what) {
    const auto it = std::find(written.begin(), written.end(), what);
    return it == written.end() ? written.size() : static_cast<size_t>(it - written.begin());
  }
};

Action act(Change change, const std::string& chain, FailureEffect effect, bool guards = false) {
  Action a;
  a.change = std::move(change);
  a.chain = chain;
  a.on_failure = effect;
  a.guards_rest = guards;
  return a;
}
Action create(int i) {
  const std::string name = "cpu-" + std::to_string(i);
  return act(CreatePod{name, name, {}, {}}, name, FailureEffect::kCreate);
}
Action mirror(const std::string& pod) {
  return act(PatchPod{pod, "conditions", {}, true, "", ""}, pod, FailureEffect::kSync);
}
Action drain(const std::string& pod, bool guards = true) {
  return act(DrainSlurmNode{pod, "why", ""}, pod, FailureEffect::kDeletionBlocked, guards);
}

TEST(NodeSetExecute, DecisionsRunBeforeCreationsAndCreationsBeforeMirrors) {
  FakeWriter writer;
  const std::vector<Action> actions = {
      mirror("cpu-5"), create(1), drain("cpu-4"),
      act(CreateRevision{{{"metadata", {{"name", "r2"}}}}}, "", FailureEffect::kApply)};
  EXPECT_TRUE(execute_actions(actions, writer).empty());
  ASSERT_EQ(writer.written.size(), 4U);
  const size_t last_decision = std::max(writer.index_of("drain Slurm node cpu-4: why"),
                                        writer.index_of("create ControllerRevision r2"));
  EXPECT_LT(last_decision, writer.index_of("create pod cpu-1"));
  EXPECT_LT(writer.index_of("create pod cpu-1"),
            writer.index_of("patch pod cpu-5 conditions: null"));
  EXPECT_EQ(writer.recorded.size(), 4U);
}

TEST(NodeSetExecute, AFailedGuardSkipsTheRestOfItsChainOnly) {
  FakeWriter writer;
  writer.failing = {"drain Slurm node cpu-1: why"};
  const std::vector<Action> actions = {
      drain("cpu-1"),
      act(PatchPod{"cpu-1", "cordon", {}, false, "", ""}, "cpu-1", FailureEffect::kSync),
      drain("cpu-2")};
  const auto failures = execute_actions(actions, writer);
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_EQ(failures[0].message, "drain Slurm node cpu-1: why: refused");
  EXPECT_EQ(writer.index_of("patch pod cpu-1 cordon: null"), writer.written.size())
      << "the cordon after a failed drain is never written";
  EXPECT_LT(writer.index_of("drain Slurm node cpu-2: why"), writer.written.size());
  EXPECT_EQ(writer.recorded, std::vector<std::string>{"drain Slurm node cpu-2: why"});
}

TEST(NodeSetExecute, AFailureThatGuardsNothingLetsItsChainGoOn) {
  FakeWriter writer;
  writer.failing = {"drain Slurm node cpu-1: why"};
  const std::vector<Action> actions = {drain("cpu-1", false), mirror("cpu-1")};
  EXPECT_EQ(execute_actions(actions, writer).size(), 1U);
  EXPECT_EQ(writer.written.size(), 2U);
}

TEST(NodeSetExecute, CreationsStartSlowlyAndStopAtTheFirstRefusedBatch) {
  FakeWriter writer;
  // Batches of 1, 2, 4: the fourth creation is in the third batch, which is the last written.
  writer.failing = {"create pod cpu-3"};
  std::vector<Action> actions;
  for (int i = 0; i < 20; ++i) {
    actions.push_back(create(i));
  }
  const auto failures = execute_actions(actions, writer);
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_EQ(writer.written.size(), 7U) << "1 + 2 + 4 written, then none";
}

TEST(NodeSetExecute, NoPodIsCreatedAfterAFailedWriteOfTheNodeSetsOwnObjects) {
  FakeWriter writer;
  writer.failing = {"create SSH host keys"};
  const std::vector<Action> actions = {
      act(CreateSshHostKeys{}, "prerequisites", FailureEffect::kApply), create(0), mirror("cpu-9")};
  EXPECT_EQ(execute_actions(actions, writer).size(), 1U);
  EXPECT_EQ(writer.index_of("create pod cpu-0"), writer.written.size());
  EXPECT_LT(writer.index_of("patch pod cpu-9 conditions: null"), writer.written.size())
      << "the state mirrors still run";
}

TEST(NodeSetExecute, ThousandsOfChainsAllRunOnceEach) {
  FakeWriter writer;
  std::vector<Action> actions;
  for (int i = 0; i < 2000; ++i) {
    actions.push_back(mirror("cpu-" + std::to_string(i)));
  }
  EXPECT_TRUE(execute_actions(actions, writer).empty());
  EXPECT_EQ(std::set<std::string>(writer.written.begin(), writer.written.end()).size(), 2000U);
}

}  // namespace
}  // namespace tightrope::op
