// A slurmrestd that misbehaves on the wire, played by a scripted loopback server: each case ends
// in a clear error within the client's time, holds no more than the client's cap, and leaves the
// change feed with the last snapshot it read.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "scripted_server.hpp"
#include "slurm/client.hpp"
#include "slurm/feed.hpp"

namespace tightrope::slurm {
namespace {

using std::chrono::milliseconds;
using testing::Exchange;
using testing::http_answer;
using testing::http_head_without_length;
using testing::ScriptedServer;

class FixedToken : public TokenSource {
 public:
  Result<std::string> token() override { return std::string("token"); }
  void invalidate() override {}
};

ClientOptions options_for(const ScriptedServer& server) {
  ClientOptions options;
  options.url = server.url();
  options.timeout = milliseconds(300);
  options.max_attempts = 2;
  options.backoff_initial = milliseconds(10);
  return options;
}

const std::string kOneNode =
    R"({"nodes":[{"name":"n1","state":["IDLE"]}],"last_update":{"set":true,"number":1},)"
    R"("errors":[],"warnings":[]})";

TEST(HostileSlurmrestd, GarbageIsAProtocolErrorAndIsNotAskedAgain) {
  ScriptedServer server([](const std::string&, Exchange& x) {
    x.send(http_answer(200, "\x01\x02 not json at all", "application/octet-stream"));
  });
  Client client(options_for(server), std::make_shared<FixedToken>());
  const auto list = client.list_nodes();
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kProtocol);
  EXPECT_EQ(list.error().message, "GET /slurm/v0.0.44/nodes?flags=DETAIL: answer is not JSON");
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST(HostileSlurmrestd, AProxysBadGatewayPageIsUnavailable) {
  ScriptedServer server([](const std::string&, Exchange& x) {
    x.send(http_answer(502, "<html><body><h1>502 Bad Gateway</h1></body></html>\n", "text/html"));
  });
  Client client(options_for(server), std::make_shared<FixedToken>());
  const auto list = client.list_nodes();
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kUnavailable);
  EXPECT_EQ(list.error().message,
            "GET /slurm/v0.0.44/nodes?flags=DETAIL: 502 <html><body><h1>502 Bad "
            "Gateway</h1></body></html> ");
}

TEST(HostileSlurmrestd, AServerThatNeverAnswersTimesOutWithinTheClientsTime) {
  ScriptedServer server([](const std::string&, Exchange& x) { x.hold(milliseconds(30000)); });
  Client client(options_for(server), std::make_shared<FixedToken>());
  const auto started = std::chrono::steady_clock::now();
  const auto list = client.list_nodes();
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kUnavailable);
  EXPECT_NE(list.error().message.find("Timeout"), std::string::npos) << list.error().message;
  // Two attempts of 300 ms and a backoff: far from the server's 30 s.
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_EQ(server.requests().size(), 2U);
}

TEST(HostileSlurmrestd, AnAnswerThatStallsMidBodyTimesOut) {
  ScriptedServer server([](const std::string&, Exchange& x) {
    const std::string whole = http_answer(200, kOneNode);
    x.send(whole.substr(0, whole.size() - 20));
    x.hold(milliseconds(30000));
  });
  Client client(options_for(server), std::make_shared<FixedToken>());
  const auto started = std::chrono::steady_clock::now();
  const auto list = client.list_nodes();
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(5000));
}

TEST(HostileSlurmrestd, AnAnswerCutMidBodyIsAskedAgainAndNeverHalfRead) {
  std::atomic<int> served{0};
  ScriptedServer server([&](const std::string&, Exchange& x) {
    const std::string whole = http_answer(200, kOneNode);
    x.send(++served == 1 ? whole.substr(0, whole.size() - 20) : whole);
  });
  Client client(options_for(server), std::make_shared<FixedToken>());
  const auto list = client.list_nodes();
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->list.nodes.size(), 1U);
  EXPECT_EQ(list->list.nodes[0].name, "n1");
  EXPECT_EQ(server.requests().size(), 2U);
}

TEST(HostileSlurmrestd, AnAnswerOverTheCapIsRefusedWhetherOrNotItSaysItsLength) {
  const std::string huge = "[" + std::string(2U << 20U, ' ') + "]";
  for (const bool with_length : {true, false}) {
    ScriptedServer server([&](const std::string&, Exchange& x) {
      x.send(with_length ? http_answer(200, huge) : http_head_without_length(200) + huge);
    });
    ClientOptions options = options_for(server);
    options.max_answer_bytes = size_t{1} << 20U;
    Client client(options, std::make_shared<FixedToken>());
    const auto list = client.list_nodes();
    ASSERT_FALSE(list);
    EXPECT_EQ(list.error().kind, ErrorKind::kProtocol);
    EXPECT_NE(list.error().message.find("a body over 1048576 bytes, not read"), std::string::npos)
        << list.error().message;
    EXPECT_EQ(server.requests().size(), 1U);
  }
}

TEST(HostileSlurmrestd, AnAnswerOfExactlyTheCapIsReadWholeWhetherOrNotItSaysItsLength) {
  // The body's buffer grows to the cap at once past half of it: what fits is still read.
  const size_t cap = size_t{1} << 20U;
  std::string answer = kOneNode;
  answer.insert(answer.size() - 1, cap - answer.size(), ' ');
  ASSERT_EQ(answer.size(), cap);
  for (const bool with_length : {true, false}) {
    ScriptedServer server([&](const std::string&, Exchange& x) {
      x.send(with_length ? http_answer(200, answer) : http_head_without_length(200) + answer);
    });
    ClientOptions options = options_for(server);
    options.max_answer_bytes = cap;
    Client client(options, std::make_shared<FixedToken>());
    const auto list = client.list_nodes();
    ASSERT_TRUE(list) << list.error().message;
    ASSERT_EQ(list->list.nodes.size(), 1U);
    EXPECT_EQ(list->list.nodes[0].name, "n1");
  }
}

TEST(HostileSlurmrestd, TheCapLeavesRoomForNinetyThousandNodes) {
  // 2.7 KB a node (docs/benchmarks.md).
  EXPECT_GT(kMaxAnswerBytes, size_t{90000} * 2700);
}

TEST(HostileSlurmrestd, TheFeedKeepsItsLastSnapshotThroughGarbage) {
  std::atomic<bool> garbage{false};
  ScriptedServer server([&](const std::string&, Exchange& x) {
    x.send(garbage ? http_answer(200, "{\"nodes\": [{\"name\": \"n1\", \"sta")
                   : http_answer(200, kOneNode));
  });
  Client client(options_for(server), std::make_shared<FixedToken>());
  ChangeFeed feed(client);
  ASSERT_TRUE(feed.poll_once());
  garbage = true;
  const auto failed = feed.poll_once();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().kind, ErrorKind::kProtocol);
  EXPECT_FALSE(feed.health().synced);
  const SlurmSnapshot kept = feed.snapshot();
  ASSERT_EQ(kept.nodes->size(), 1U);
  EXPECT_EQ(kept.nodes->at("n1").name, "n1");
}

}  // namespace
}  // namespace tightrope::slurm
