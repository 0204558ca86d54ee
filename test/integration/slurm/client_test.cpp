// slurm::Client against the bed's real slurmctld, slurmrestd and slurmd nodes.
#include "slurm/client.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "http.hpp"
#include "testbed.hpp"

namespace tightrope::slurm {
namespace {

using tightrope::testing::TestBed;
using namespace std::chrono_literals;

ClientOptions options() {
  ClientOptions o;
  o.url = TestBed::var("SLURMRESTD_URL");
  return o;
}

std::shared_ptr<TokenSource> minting(std::chrono::seconds lifetime = std::chrono::hours(1)) {
  return std::make_shared<MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm", lifetime);
}

Client client() {
  return {options(), minting()};
}

template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) {
      return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return predicate();
}

Node node(Client& c, const std::string& name) {
  auto n = c.get_node(name);
  EXPECT_TRUE(n.ok()) << n.error().message;
  return n.ok() ? *n : Node{};
}

bool idle_and_responding(Client& c, const std::string& name) {
  const Node n = node(c, name);
  return n.base_state() == "IDLE" && !n.drain() && !n.has("NOT_RESPONDING");
}

TEST(SlurmClient, DrainsWithAReasonAndResumes) {
  Client c = client();
  ASSERT_TRUE(c.drain("n1", "tightrope test: drain").ok());
  const Node drained = node(c, "n1");
  EXPECT_TRUE(drained.drain());
  EXPECT_EQ(drained.reason, "tightrope test: drain");
  EXPECT_EQ(drained.reason_set_by, "slurm");
  EXPECT_TRUE(drained.reason_changed_at.has_value());
  // One node alone, as the operator reads it before it drains or undrains.
  auto alone = c.get_node_state("n1");
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_TRUE(alone->drain());
  EXPECT_EQ(alone->reason, "tightrope test: drain");
  ASSERT_TRUE(c.resume("n1").ok());
  EXPECT_TRUE(eventually([&] { return idle_and_responding(c, "n1"); }));
  EXPECT_EQ(c.get_node_state("no-such-node").error().kind, ErrorKind::kNotFound);
}

// An administrator's reason with a terminal escape, a line break and a byte typed in Latin-1,
// sent to slurmrestd as it came: what Slurm keeps of it is read back as printable UTF-8 that a
// pod condition can carry, and the rest of the list stays readable.
TEST(SlurmClient, AReasonWithControlCharactersAndLatin1ComesBackPrintable) {
  Client c = client();
  auto token = minting()->token();
  ASSERT_TRUE(token.ok()) << token.error().message;
  tightrope::testing::HttpRequest post;
  post.method = "POST";
  post.url = TestBed::var("SLURMRESTD_URL") + "/slurm/v0.0.44/node/n1";
  post.headers = {"X-SLURM-USER-TOKEN: " + *token, "Content-Type: application/json"};
  post.body = R"({"state":["DRAIN"],"reason":"\u001b[31mfan\nL)"
              "\xFC"
              R"(fter\tfailed"})";
  const auto answer = tightrope::testing::http(post);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const Node drained = node(c, "n1");
  EXPECT_TRUE(drained.drain());
  EXPECT_EQ(drained.reason,
            " [31mfan L\xEF\xBF\xBD"
            "fter failed");
  EXPECT_NO_THROW((void)nlohmann::json::object({{"message", drained.reason}}).dump());
  ASSERT_TRUE(c.resume("n1").ok());
  EXPECT_TRUE(eventually([&] { return idle_and_responding(c, "n1"); }));
}

TEST(SlurmClient, UndrainClearsADrainWithoutResumingADownNode) {
  Client c = client();
  ASSERT_TRUE(c.drain("n2", "tightrope test: undrain").ok());
  ASSERT_TRUE(c.undrain("n2").ok());
  EXPECT_FALSE(node(c, "n2").drain());
  EXPECT_TRUE(eventually([&] { return idle_and_responding(c, "n2"); }));
}

TEST(SlurmClient, SetsANodeDownWithAReasonAndResumesIt) {
  Client c = client();
  ASSERT_TRUE(c.set_down("n1", "tightrope test: down").ok());
  const Node down = node(c, "n1");
  EXPECT_EQ(down.base_state(), "DOWN");
  EXPECT_EQ(down.reason, "tightrope test: down");
  ASSERT_TRUE(c.resume("n1").ok());
  EXPECT_TRUE(eventually([&] { return idle_and_responding(c, "n1"); }));
}

TEST(SlurmClient, UpdatesFeaturesAndTopology) {
  Client c = client();
  NodeUpdate u;
  u.features = std::vector<std::string>{"tb", "gpu"};  // "tb" keeps the node in its NodeSet
  u.active_features = std::vector<std::string>{"tb", "gpu"};
  u.topology = "topo-switch:s2,topo-block:b2";
  ASSERT_TRUE(c.update_node("n3", u).ok());
  Node n = node(c, "n3");
  EXPECT_EQ(n.features, (std::vector<std::string>{"tb", "gpu"}));
  EXPECT_EQ(n.active_features, (std::vector<std::string>{"tb", "gpu"}));
  EXPECT_EQ(n.topology, "topo-switch:s2,topo-block:b2");

  NodeUpdate back;
  back.features = std::vector<std::string>{"tb"};
  back.active_features = std::vector<std::string>{"tb"};
  back.topology = "";  // cleared: a saved node must not keep a topology that may go away
  ASSERT_TRUE(c.update_node("n3", back).ok());
  n = node(c, "n3");
  EXPECT_EQ(n.features, std::vector<std::string>{"tb"});
  EXPECT_EQ(n.topology, "");
}

TEST(SlurmClient, KeepsAJsonCommentExactly) {
  Client c = client();
  const nlohmann::json link = {{"namespace", "slurm"}, {"podName", "gpu-0"}, {"uid", "a\"b"}};
  NodeUpdate u;
  u.comment = link.dump();
  ASSERT_TRUE(c.update_node("n3", u).ok());
  EXPECT_EQ(nlohmann::json::parse(node(c, "n3").comment), link);
  u.comment = "";
  ASSERT_TRUE(c.update_node("n3", u).ok());
  EXPECT_EQ(node(c, "n3").comment, "");
}

TEST(SlurmClient, AnInvalidStateIsATypedInvalidError) {
  Client c = client();
  NodeUpdate u;
  u.state = {"BOGUS"};
  const auto r = c.update_node("n1", u);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalid) << r.error().message;
}

TEST(SlurmClient, AnUnknownNodeIsNotFound) {
  Client c = client();
  EXPECT_EQ(c.get_node("nosuch").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(c.delete_node("nosuch").error().kind, ErrorKind::kNotFound);
}

TEST(SlurmClient, ASubmittedJobAllocatesItsNodeUntilCancelled) {
  Client c = client();
  JobSubmission job;
  job.name = "tightrope-test";
  job.partition = TestBed::var("SLURM_PARTITION");
  job.script = "#!/bin/sh\nsleep 300\n";
  job.working_directory = TestBed::var("SLURM_JOB_DIR");
  job.tasks = 2;  // both CPUs of the node: ALLOCATED, not MIXED
  job.required_nodes = {"n2"};
  auto id = c.submit_job(job);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_TRUE(eventually([&] {
    auto j = c.get_job(*id);
    return j.ok() && j->has("RUNNING");
  }));
  EXPECT_TRUE(eventually([&] { return node(c, "n2").base_state() == "ALLOCATED"; }))
      << node(c, "n2").base_state();
  EXPECT_TRUE(node(c, "n2").busy());
  auto jobs = c.list_jobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(std::any_of(jobs->list.jobs.begin(), jobs->list.jobs.end(),
                          [&](const Job& j) { return j.id == *id && j.nodes == "n2"; }));

  nlohmann::json rename = {{"name", "tightrope-renamed"}};
  const auto renamed = c.update_job(*id, rename);
  ASSERT_TRUE(renamed.ok()) << renamed.error().message;
  EXPECT_EQ(c.get_job(*id)->name, "tightrope-renamed");

  ASSERT_TRUE(c.cancel_job(*id).ok());
  EXPECT_TRUE(eventually([&] { return c.get_job(*id)->has("CANCELLED"); }));
  EXPECT_TRUE(eventually([&] { return idle_and_responding(c, "n2"); }));
  EXPECT_TRUE(c.cancel_job(*id).ok()) << "cancelling a finished job is not an error";
  EXPECT_EQ(c.cancel_job(999999).error().kind, ErrorKind::kNotFound);
}

TEST(SlurmClient, CreatesAndDeletesADynamicNode) {
  Client c = client();
  const std::string name = "tr" + std::to_string(::getpid() % 100000);
  ASSERT_TRUE(
      c.create_node("NodeName=" + name + " CPUs=1 RealMemory=500 Features=tb State=FUTURE").ok());
  const auto created = c.get_node(name);
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(created->base_state(), "FUTURE");
  // The operator relies on a second create being refused, not a second node of the same name.
  EXPECT_FALSE(
      c.create_node("NodeName=" + name + " CPUs=1 RealMemory=500 Features=tb State=CLOUD").ok());
  auto without_future = c.list_nodes();
  ASSERT_TRUE(without_future.ok());
  for (const auto& n : without_future->list.nodes) {
    EXPECT_NE(n.name, name) << "FUTURE nodes are listed only when asked for";
  }
  ASSERT_TRUE(c.delete_node(name).ok());
  EXPECT_EQ(c.get_node(name).error().kind, ErrorKind::kNotFound);
}

TEST(SlurmClient, CreatesUpdatesAndDeletesAMaintenanceReservation) {
  Client c = client();
  Reservation r;
  r.name = "tr-maint-" + std::to_string(::getpid());
  r.nodes = "n3";
  r.flags = {"MAINT", "IGNORE_JOBS"};
  r.users = {"root"};
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(Time::clock::now());
  r.start_time = now;
  r.end_time = now + std::chrono::hours(1);
  // Deleted even when an assertion ends the test early: a reservation outlives the bed's up/down.
  struct Cleanup {
    Client& c;
    std::string name;
    ~Cleanup() { (void)c.delete_reservation(name); }
  } cleanup{c, r.name};
  const auto created = c.create_reservation(r);
  ASSERT_TRUE(created.ok()) << created.error().message;
  auto got = c.get_reservation(r.name);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->nodes, "n3");
  EXPECT_NE(std::find(got->flags.begin(), got->flags.end(), "MAINT"), got->flags.end());
  EXPECT_EQ(got->end_time, r.end_time);

  ReservationUpdate later;
  later.end_time = now + std::chrono::hours(2);
  const auto updated = c.update_reservation(r.name, later);
  ASSERT_TRUE(updated.ok()) << updated.error().message;
  EXPECT_EQ(c.get_reservation(r.name)->end_time, later.end_time);

  ASSERT_TRUE(c.delete_reservation(r.name).ok());
  EXPECT_EQ(c.get_reservation(r.name).error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(c.delete_reservation(r.name).error().kind, ErrorKind::kNotFound);
}

TEST(SlurmClient, PingsDiagnosesAndReconfigures) {
  Client c = client();
  auto ping = c.ping();
  ASSERT_TRUE(ping.ok());
  EXPECT_TRUE(ping->responding);
  auto diag = c.diag();
  ASSERT_TRUE(diag.ok());
  EXPECT_TRUE(diag->req_time_start.has_value());
  auto parts = c.list_partitions();
  ASSERT_TRUE(parts.ok());
  // The bed's default partition, nvlink (its block topology) over the same nodes, and
  // slurm-bridge for the bridge's external nodes.
  ASSERT_EQ(parts->size(), 3U);
  const auto bed = std::find_if(parts->begin(), parts->end(), [](const auto& p) {
    return p.name == TestBed::var("SLURM_PARTITION");
  });
  ASSERT_NE(bed, parts->end());
  EXPECT_EQ(bed->total_nodes, 3);
  EXPECT_TRUE(c.reconfigure().ok());
  EXPECT_TRUE(eventually([&] {
    return idle_and_responding(c, "n1") && idle_and_responding(c, "n2") &&
           idle_and_responding(c, "n3");
  }));
}

TEST(SlurmClient, AnswersWithoutChangeWhenNoNodeChangedSinceTheLastUpdate) {
  Client c = client();
  auto full = c.list_nodes();
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full->list.last_update.has_value());
  // Slurm compares whole seconds: nothing changed at or after last_update + 1 s.
  auto unchanged = c.list_nodes(NodeQuery{*full->list.last_update + 1s, false});
  ASSERT_TRUE(unchanged.ok()) << unchanged.error().message;
  EXPECT_FALSE(unchanged->changed);
}

TEST(SlurmClient, DataParserV0045WorksToo) {
  ClientOptions o = options();
  o.version = &kV0045;
  Client c(o, minting());
  auto nodes = c.list_nodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  EXPECT_EQ(nodes->list.nodes.size(), 3U);
}

// A token source whose first token expired an hour ago.
class ExpiredFirst : public TokenSource {
 public:
  Result<std::string> token() override {
    const auto issued = fresh_ ? Time::clock::now() : Time::clock::now() - std::chrono::hours(2);
    return mint_jwt(key(), JwtClaims{"slurm", issued, std::chrono::hours(1), "test", {}});
  }
  void invalidate() override {
    fresh_ = true;
    ++invalidations;
  }
  int invalidations = 0;

 private:
  static std::string key() {
    std::ifstream in(TestBed::var("SLURM_JWT_KEY"), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  bool fresh_ = false;
};

TEST(SlurmClient, ReplacesAnExpiredTokenTransparently) {
  auto tokens = std::make_shared<ExpiredFirst>();
  Client c(options(), tokens);
  auto nodes = c.list_nodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  EXPECT_EQ(tokens->invalidations, 1);
}

TEST(SlurmClient, MintsAgainWhenATokenNearsItsEnd) {
  Client c(options(), minting(std::chrono::seconds(2)));
  ASSERT_TRUE(c.list_nodes().ok());
  std::this_thread::sleep_for(2500ms);  // past the first token's exp
  auto again = c.list_nodes();
  EXPECT_TRUE(again.ok()) << again.error().message;
}

TEST(SlurmClient, AWrongKeyIsATypedUnauthorizedError) {
  const auto key = std::filesystem::temp_directory_path() /
                   ("tightrope-wrong-" + std::to_string(::getpid()) + ".key");
  std::ofstream(key) << "not the cluster's key";
  Client c(options(), std::make_shared<MintingTokenSource>(key, "slurm"));
  const auto r = c.list_nodes();
  std::filesystem::remove(key);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kUnauthorized) << r.error().message;
}

TEST(SlurmClient, AnUnreachableSlurmrestdIsUnavailableAfterBoundedRetries) {
  ClientOptions o = options();
  o.url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.backoff_initial = 10ms;
  Client c(o, minting());
  const auto r = c.ping();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kUnavailable);
  EXPECT_EQ(r.error().http_status, 0);
}

// Last: it stops and restarts the bed's slurmctld.
TEST(SlurmClientWithoutController, IsUnavailableWithinItsTimeoutAndRecovers) {
  const pid_t ctld = TestBed::pid_of("slurmctld");
  ASSERT_EQ(::kill(ctld, SIGTERM), 0);
  ASSERT_TRUE(eventually([&] { return tightrope::testing::process_gone(ctld); }, 30s))
      << "slurmctld did not stop";
  std::this_thread::sleep_for(1s);

  ClientOptions o = options();
  o.timeout = 2s;
  o.max_attempts = 1;
  Client c(o, minting());
  const auto started = std::chrono::steady_clock::now();
  const auto r = c.list_nodes();
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kUnavailable) << r.error().message;
  EXPECT_LT(took, 4s) << "the client's own timeout bounds the wait, not slurmrestd's";

  ASSERT_EQ(TestBed::up(), 0);
  Client after = client();
  EXPECT_TRUE(eventually([&] { return after.list_nodes().ok(); }, 30s));
  EXPECT_TRUE(eventually(
      [&] {
        return idle_and_responding(after, "n1") && idle_and_responding(after, "n2") &&
               idle_and_responding(after, "n3");
      },
      60s));
}

}  // namespace
}  // namespace tightrope::slurm
