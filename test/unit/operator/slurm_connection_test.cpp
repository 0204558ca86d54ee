// The Slurm connection's decisions and the one definition of reach: which RestApi a cluster is
// reached through, when there is no connection and why, and what each feed state means for
// every SlurmReachable condition.
#include "operator/slurm_connection.hpp"

#include <gtest/gtest.h>

#include "operator/build/controller.hpp"
#include "operator/log_hints.hpp"
#include "operator/slurm_clients.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

api::RestApi restapi(const std::string& name, const std::string& created,
                     const std::string& controller = "slurm", bool deleting = false) {
  api::RestApi r;
  r.metadata.name = name;
  r.metadata.namespace_name = "hpc";
  r.metadata.creation_timestamp = created;
  r.metadata.deleting = deleting;
  r.spec.controller_ref.name = controller;
  return r;
}

TEST(SlurmConnection, TheOldestRestApiOfTheControllerIsTheOneAndASecondNeverMovesIt) {
  const auto chosen = connection_restapi(
      "slurm", {restapi("b", "2026-12-01T00:00:00Z"), restapi("a", "2026-12-02T00:00:00Z"),
                restapi("z", "2026-11-01T00:00:00Z", "other"),
                restapi("y", "2026-11-01T00:00:00Z", "slurm", true)});
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->metadata.name, "b");
  EXPECT_FALSE(connection_restapi("slurm", {restapi("z", "2026-11-01T00:00:00Z", "other")}));
}

TEST(SlurmConnection, NoRestApiOrNoJwtKeyMeansNoConnectionAndSaysWhich) {
  api::Controller c = testing::controller();
  ConnectionPlan plan = plan_connection(c, std::nullopt, "");
  EXPECT_FALSE(plan.jwt_key);
  EXPECT_EQ(plan.reason, "NoRestApi");

  const auto through = restapi("slurm", "2026-12-01T00:00:00Z");
  plan = plan_connection(c, through, "http://slurm-restapi.hpc:6820");
  ASSERT_TRUE(plan.jwt_key);
  EXPECT_EQ(plan.jwt_key->name, "jwt-key");
  EXPECT_EQ(plan.url, "http://slurm-restapi.hpc:6820");
  EXPECT_TRUE(plan.reason.empty());

  c.spec.jwt_key_ref.reset();
  c.spec.jwt_hs256_key_ref.reset();
  plan = plan_connection(c, through, "http://slurm-restapi.hpc:6820");
  EXPECT_FALSE(plan.jwt_key);
  EXPECT_EQ(plan.reason, "NoJwtKey");
}

TEST(SlurmReach, EachFeedStateIsOneHealthWithItsReason) {
  const std::string url = "http://slurm-restapi.hpc:6820";
  slurm::FeedHealth health;
  SlurmReach reach = reach_of(health, url, std::nullopt);
  EXPECT_EQ(reach.health, SlurmHealth::kWaiting);
  EXPECT_EQ(reach.reason, "NotYetRead");

  health.synced = true;
  reach = reach_of(health, url, std::nullopt);
  EXPECT_TRUE(reach.ok());
  EXPECT_EQ(reach.reason, "Responding");
  EXPECT_EQ(reach.message, "slurmctld answers through " + url);

  health.consecutive_failures = 1;
  health.last_error = slurm::Error{slurm::ErrorKind::kUnauthorized, 401, "token refused", {}};
  reach = reach_of(health, url, std::nullopt);
  EXPECT_EQ(reach.health, SlurmHealth::kUnreachable) << "synced before, failing now";
  EXPECT_EQ(reach.reason, "Unauthorized");
  EXPECT_EQ(reach.message, "slurmrestd at " + url + " does not answer: token refused");

  health.last_error = slurm::Error{slurm::ErrorKind::kUnavailable, 0, "connection refused", {}};
  EXPECT_EQ(reach_of(health, url, std::nullopt).reason, "Unreachable");
}

TEST(SlurmReach, WithoutAConnectionItSaysWhyOrThatNoneWasMadeYet) {
  SlurmReach reach = reach_of(
      std::nullopt, "",
      std::pair<std::string, std::string>{"NoRestApi", "no RestApi names this Controller"});
  EXPECT_EQ(reach.health, SlurmHealth::kNoClient);
  EXPECT_EQ(reach.reason, "NoRestApi");
  EXPECT_EQ(reach.message, "no RestApi names this Controller");
  reach = reach_of(std::nullopt, "", std::nullopt);
  EXPECT_EQ(reach.reason, "NotConnected");
}

TEST(SlurmReach, ADisconnectionIsRecordedAndForgottenWithItsController) {
  SlurmClients clients;
  int told = 0;
  clients.set_listener([&](const std::string& key, const NodeSetIndex::Touched* touched) {
    EXPECT_EQ(key, "hpc/slurm");
    EXPECT_EQ(touched, nullptr);
    ++told;
  });
  clients.disconnect("hpc/slurm", "NoJwtKey", "no jwtKeyRef");
  EXPECT_EQ(clients.reach("hpc/slurm").reason, "NoJwtKey");
  EXPECT_EQ(told, 1);
  clients.disconnect("hpc/slurm", "NoJwtKey", "no jwtKeyRef");
  EXPECT_EQ(told, 1) << "nothing new: nobody is woken";
  clients.erase("hpc/slurm");
  EXPECT_EQ(clients.reach("hpc/slurm").reason, "NotConnected");
}

TEST(LogHints, AFollowThatFailsIsTriedAgainSoonThenLessOften) {
  using std::chrono::milliseconds;
  EXPECT_EQ(follow_backoff(0), milliseconds(0)) << "after a follow that lasted: at once";
  EXPECT_EQ(follow_backoff(1), milliseconds(1000));
  EXPECT_EQ(follow_backoff(2), milliseconds(2000));
  EXPECT_EQ(follow_backoff(5), milliseconds(16000));
  EXPECT_EQ(follow_backoff(6), milliseconds(30000));
  EXPECT_EQ(follow_backoff(60), milliseconds(30000));
}

TEST(LogHints, TheControllersOwnSlurmctldPodsAreFollowedAndAnExternalOneIsNot) {
  api::Controller c;
  c.metadata.name = "slurm";
  EXPECT_EQ(build::controller_pod_names(c), std::vector<std::string>{"slurm-controller-0"});
  c.spec.ha.enabled = true;
  c.spec.ha.backups = 1;
  EXPECT_EQ(build::controller_pod_names(c),
            (std::vector<std::string>{"slurm-controller-0", "slurm-controller-1"}));
  c.spec.external = true;
  EXPECT_TRUE(build::controller_pod_names(c).empty());
}

}  // namespace
}  // namespace tightrope::op
