// Leader election between real processes on the bed's API server: one leads at a time, a
// killed leader is replaced within about one lease duration, a frozen leader that wakes up does
// not act, and a clean stop releases the lease.
#include "kube/leader.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube_support.hpp"
#include "testbed.hpp"

namespace tightrope::kube {
namespace {

using testing::eventually;
using testing::fresh_namespace;
using testing::make_client;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A candidate process; killed when the test ends, however it ends.
struct Candidate {
  pid_t pid = -1;
  std::string file;

  Candidate() = default;
  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;
  ~Candidate() {
    if (pid > 0 && kill(pid, SIGKILL) == 0) {
      waitpid(pid, nullptr, 0);
    }
  }
  void reap() {
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

void spawn(Candidate& c, const std::string& ns, const std::string& identity,
           const std::string& dir) {
  const std::string kubeconfig = tightrope::testing::TestBed::var("KUBECONFIG");
  c.file = dir + "/" + identity + ".log";
  c.pid = fork();
  if (c.pid == 0) {
    execl(TIGHTROPE_LEASE_CANDIDATE, TIGHTROPE_LEASE_CANDIDATE, kubeconfig.c_str(), ns.c_str(),
          "operator-lease", identity.c_str(), c.file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

// Times (ms) of the lines of one kind a candidate wrote.
std::vector<int64_t> lines_of(const Candidate& c, const std::string& kind) {
  std::ifstream in(c.file);
  std::vector<int64_t> out;
  std::string what;
  int64_t at = 0;
  while (in >> what >> at) {
    if (what == kind) {
      out.push_back(at);
    }
  }
  return out;
}

TEST(LeaderElection, HandsOverAfterAKillAndAWokenLeaderDoesNotAct) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  std::string dir = "/tmp/tightrope-lease-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);

  Candidate a;
  spawn(a, ns, "a", dir);
  ASSERT_TRUE(eventually([&] { return !lines_of(a, "act").empty(); }, std::chrono::seconds(20)));
  Candidate b;
  spawn(b, ns, "b", dir);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_TRUE(lines_of(b, "act").empty()) << "b acted while a led";

  // kill -9: no release, b must wait the lease out.
  const int64_t killed_at = now_ms();
  ASSERT_EQ(kill(a.pid, SIGKILL), 0);
  a.reap();
  ASSERT_TRUE(eventually([&] { return !lines_of(b, "act").empty(); }, std::chrono::seconds(20)));
  const int64_t handover_ms = lines_of(b, "act").front() - killed_at;
  std::cout << "handover after kill -9: " << handover_ms << " ms (lease 3000 ms, retry 500 ms)\n";
  RecordProperty("handover_ms", std::to_string(handover_ms));
  // The successor counts the lease from when it saw the last renewal, which it learns at its
  // next poll: the handover can exceed the lease by up to one retry period.
  EXPECT_LE(handover_ms, 3000 + 600);

  // Freeze the leader past its lease; c takes over; b wakes up and must not act again.
  ASSERT_EQ(kill(b.pid, SIGSTOP), 0);
  Candidate c;
  spawn(c, ns, "c", dir);
  ASSERT_TRUE(eventually([&] { return !lines_of(c, "act").empty(); }, std::chrono::seconds(20)));
  const int64_t woken_at = now_ms();
  ASSERT_EQ(kill(b.pid, SIGCONT), 0);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (const int64_t t : lines_of(b, "act")) {
    EXPECT_LT(t, woken_at) << "b acted after it woke up, while c held the lease";
  }
  EXPECT_FALSE(lines_of(b, "stopped").empty()) << "b did not notice it lost the lease";
  EXPECT_FALSE(lines_of(b, "lost").empty()) << "b lost the lease without a warning";

  // A clean stop releases the lease at once.
  ASSERT_EQ(kill(b.pid, SIGTERM), 0);
  b.reap();
  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  c.reap();
  EXPECT_TRUE(lines_of(c, "lost").empty()) << "a clean stop is no lost lease";
  EXPECT_FALSE(lines_of(c, "stepped_down").empty());
  auto lease = client->get(resources::leases(), ns, "operator-lease");
  ASSERT_TRUE(lease);
  EXPECT_EQ(testing::field<std::string>(*lease, "/spec/holderIdentity", "?"), "");
  EXPECT_GE(testing::field(*lease, "/spec/leaseTransitions", 0), 2);
}

}  // namespace
}  // namespace tightrope::kube
