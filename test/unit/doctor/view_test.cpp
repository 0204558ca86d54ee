// ClusterView's lookups by name: the same answers as a scan, whatever was done to the view.
#include "doctor/view.hpp"

#include <gtest/gtest.h>

#include "view_fixture.hpp"

namespace tightrope::doctor::testing {
namespace {

TEST(ClusterViewLookups, FindWorkersNodesSlurmNodesAndJobsByName) {
  Fixture f;
  f.worker("w1");
  f.worker("w2", "k8s-1");
  f.view.kube_nodes.push_back({{"metadata", {{"name", "k8s-1"}}}});
  f.job(7, "RUNNING", "w[1-2]");
  f.job(8, "PENDING", "w1");
  const ClusterView& v = f.view;
  ASSERT_NE(v.pod_of_slurm_node("w2"), nullptr);
  EXPECT_EQ(name_of(*v.pod_of_slurm_node("w2")), "workers-w2");
  EXPECT_EQ(v.pod_of_slurm_node("slurm-controller-0"), nullptr) << "only slurmd pods";
  EXPECT_EQ(name_of(*v.kube_node("k8s-1")), "k8s-1");
  EXPECT_EQ(v.slurm_node("w1")->name, "w1");
  EXPECT_EQ(v.slurm_node("w9"), nullptr);
  ASSERT_EQ(v.jobs_on("w2").size(), 1U);
  EXPECT_EQ(v.jobs_on("w1").front()->id, 7) << "a pending job runs nowhere";
}

TEST(ClusterViewLookups, SeeWhatWasAddedAfterAnEarlierLookup) {
  Fixture f;
  f.worker("w1");
  EXPECT_EQ(f.view.slurm_node("w2"), nullptr);
  f.worker("w2");  // the vectors grow: the lookups are built again
  EXPECT_NE(f.view.slurm_node("w2"), nullptr);
  EXPECT_NE(f.view.pod_of_slurm_node("w2"), nullptr);
}

TEST(ClusterViewLookups, SeeAChangeInPlaceOnceForgotten) {
  Fixture f;
  f.worker("w1");
  EXPECT_NE(f.view.pod_of_slurm_node("w1"), nullptr);
  f.view.pods.back()["metadata"]["labels"]["nodeset.slinky.slurm.net/pod-hostname"] = "w5";
  f.view.forget_lookups();  // what doctor::diagnose does first
  EXPECT_EQ(f.view.pod_of_slurm_node("w1"), nullptr);
  EXPECT_NE(f.view.pod_of_slurm_node("w5"), nullptr);
}

TEST(ClusterViewLookups, ACopyAnswersFromItsOwnObjects) {
  Fixture f;
  f.worker("w1");
  ASSERT_NE(f.view.pod_of_slurm_node("w1"), nullptr);  // the original's lookups are built
  const ClusterView copy = f.view;
  const json* found = copy.pod_of_slurm_node("w1");
  ASSERT_NE(found, nullptr);
  EXPECT_GE(found, copy.pods.data());
  EXPECT_LT(found, copy.pods.data() + copy.pods.size()) << "a pointer into the copy";
}

}  // namespace
}  // namespace tightrope::doctor::testing
