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
