// An API server that misbehaves on the wire, played by a scripted loopback server: a watch cut
// mid-object, a watch gone silent, a line without end, an object larger than any the API server
// keeps, a list larger than the client holds. The reflector applies whole objects only, resumes
// from the last one it applied, and keeps what it had.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"
#include "kube/object.hpp"
#include "kube/reflector.hpp"
#include "scripted_server.hpp"

namespace tightrope::kube {
namespace {

using std::chrono::milliseconds;
using testing::Exchange;
using testing::http_answer;
using testing::ScriptedServer;

// What the sink was told, as "list:NAME@VERSION" and "TYPE:NAME@VERSION".
class RecordingSink : public ReflectorSink {
 public:
  void begin_list() override { record("begin"); }
  void list_item(simdjson::dom::element object) override { record("list:" + describe(object)); }
  void end_list() override { record("end"); }
  void watch_event(WatchEventType type, simdjson::dom::element object) override {
    record(std::string(to_string(type)) + ":" + describe(object));
  }

  std::vector<std::string> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  static std::string describe(simdjson::dom::element object) {
    simdjson::dom::element meta;
    if (object["metadata"].get(meta) != simdjson::SUCCESS) {
      return "?";
    }
    return std::string(string_at(meta, "name")) + "@" +
           std::string(string_at(meta, "resourceVersion"));
  }
  void record(std::string what) {
    std::lock_guard lock(mu_);
    seen_.push_back(std::move(what));
  }

  mutable std::mutex mu_;
  std::vector<std::string> seen_;
};

std::string pod(const std::string& name, int version) {
  return R"({"kind":"Pod","metadata":{"name":")" + name + R"(","resourceVersion":")" +
         std::to_string(version) + R"("}})";
}

std::string event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

const std::string kList =
    R"({"kind":"PodList","metadata":{"resourceVersion":"10"},"items":[)" + pod("a", 10) + "]}";

// The API server's framing of a watch: chunked, one chunk an event.
std::string chunked_head() {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
         "Connection: close\r\n\r\n";
}

std::string chunk(const std::string& data) {
  char size[32];
  (void)std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

bool is_watch(const std::string& request_line) {
  return request_line.find("watch=true") != std::string::npos;
}

Config config_for(const ScriptedServer& server) {
  Config config;
  config.server = server.url();
  return config;
}

struct Bed {
  ScriptedServer server;
  Client client;
  RecordingSink sink;
  Reflector reflector;
  std::thread thread;

  explicit Bed(ScriptedServer::Script script, ClientOptions options = {},
               ReflectorOptions reflector_options = fast())
      : server(std::move(script)),
        client(config_for(server), options),
        reflector(client, resources::pods(), "default", std::move(reflector_options), sink) {
    thread = std::thread([this] { reflector.run(); });
  }
  ~Bed() {
    reflector.stop();
    thread.join();
  }
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  static ReflectorOptions fast() {
    ReflectorOptions options;
    options.backoff_initial = milliseconds(10);
    options.backoff_max = milliseconds(50);
    return options;
  }

  // Waits until `done` holds of what the sink saw, for at most ten seconds.
  template <typename Done>
  bool wait_for(Done done) {
    for (int i = 0; i < 1000 && !done(sink.seen()); ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return done(sink.seen());
  }

  // The watches asked for, by the resourceVersion they resumed from.
  std::vector<std::string> watched_from() const {
    std::vector<std::string> out;
    for (const auto& line : server.requests()) {
      if (is_watch(line)) {
        const size_t at = line.find("resourceVersion=");
        out.push_back(at == std::string::npos
                          ? ""
                          : line.substr(at + 16, line.find_first_of("& ", at) - at - 16));
      }
    }
    return out;
  }
};

TEST(HostileWatch, AStreamCutMidObjectAppliesNoHalfAndResumesFromTheLastWholeOne) {
  std::atomic<int> watches{0};
  Bed bed([&](const std::string& line, Exchange& x) {
    if (!is_watch(line)) {
      x.send(http_answer(200, kList));
      return;
    }
    x.send(chunked_head());
    if (++watches == 1) {
      const std::string half = event("MODIFIED", pod("a", 12));
      x.send(chunk(event("ADDED", pod("b", 11))));
      // The connection drops in the middle of the second event, mid-chunk.
      x.send(chunk(half).substr(0, 4 + half.size() / 2));
      return;
    }
    x.send(chunk(event("MODIFIED", pod("a", 12))));
    x.hold(milliseconds(10000));
  });
  ASSERT_TRUE(bed.wait_for([](const auto& seen) { return seen.size() >= 5; }));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(bed.sink.seen(),
            (std::vector<std::string>{"begin", "list:a@10", "end", "ADDED:b@11", "MODIFIED:a@12"}));
  const auto from = bed.watched_from();
  ASSERT_GE(from.size(), 2U);
  EXPECT_EQ(from[0], "10");
  EXPECT_EQ(from[1], "11");
  EXPECT_EQ(bed.reflector.stats().lists, 1U);
}

TEST(HostileWatch, ASilentWatchIsTakenForDeadAndResumedFromWhereItWas) {
  std::atomic<int> watches{0};
  ReflectorOptions options = Bed::fast();
  options.watch_silence_limit = milliseconds(500);
  Bed bed(
      [&](const std::string& line, Exchange& x) {
        if (!is_watch(line)) {
          x.send(http_answer(200, kList));
          return;
        }
        x.send(chunked_head());
        if (++watches == 1) {
          // One event, then not even a bookmark: a hung server, or a proxy holding a dead
          // connection open.
          x.send(chunk(event("ADDED", pod("b", 11))));
          x.hold(milliseconds(30000));
          return;
        }
        x.send(chunk(event("MODIFIED", pod("a", 12))));
        x.hold(milliseconds(10000));
      },
      {}, options);
  ASSERT_TRUE(bed.wait_for([](const auto& seen) { return seen.size() >= 5; }));
  EXPECT_EQ(bed.sink.seen(),
            (std::vector<std::string>{"begin", "list:a@10", "end", "ADDED:b@11", "MODIFIED:a@12"}));
  const auto from = bed.watched_from();
  ASSERT_GE(from.size(), 2U);
  EXPECT_EQ(from[1], "11");
  EXPECT_EQ(bed.reflector.stats().lists, 1U);
}

TEST(HostileWatch, ALineWithoutEndIsCutAtTheLineLimitAndTheWatchResumes) {
  std::atomic<int> watches{0};
  Bed bed([&](const std::string& line, Exchange& x) {
    if (!is_watch(line)) {
      x.send(http_answer(200, kList));
      return;
    }
    x.send(chunked_head());
    if (++watches == 1) {
      // Past the splitter's 16 MiB, with no newline: the client stops reading.
      const std::string endless(size_t{1} << 20U, 'x');
      for (int i = 0; i < 24 && x.send(chunk(endless)); ++i) {
      }
      return;
    }
    x.send(chunk(event("ADDED", pod("b", 11))));
    x.hold(milliseconds(10000));
  });
  ASSERT_TRUE(bed.wait_for([](const auto& seen) { return seen.size() >= 4; }));
  EXPECT_EQ(bed.sink.seen(), (std::vector<std::string>{"begin", "list:a@10", "end", "ADDED:b@11"}));
  EXPECT_EQ(bed.watched_from(), (std::vector<std::string>{"10", "10"}));
  EXPECT_GE(bed.reflector.stats().watch_failures, 1U);
}

TEST(HostileWatch, AGarbledEventIsNotAppliedAndTheWatchResumes) {
  std::atomic<int> watches{0};
  Bed bed([&](const std::string& line, Exchange& x) {
    if (!is_watch(line)) {
      x.send(http_answer(200, kList));
      return;
    }
    x.send(chunked_head());
    const int n = ++watches;
    if (n == 1) {
      // Nested past simdjson's 1024 levels.
      x.send(chunk(std::string(100000, '[') + std::string(100000, ']') + "\n"));
      return;
    }
    if (n == 2) {
      x.send(chunk(event("ADDED", R"({"metadata":{"name":"\xFF","resourceVersion":"11"}})")));
      return;
    }
    x.send(chunk(event("ADDED", pod("b", 11))));
    x.hold(milliseconds(10000));
  });
  ASSERT_TRUE(bed.wait_for([](const auto& seen) { return seen.size() >= 4; }));
  EXPECT_EQ(bed.sink.seen(), (std::vector<std::string>{"begin", "list:a@10", "end", "ADDED:b@11"}));
  EXPECT_EQ(bed.reflector.stats().garbled_lines, 2U);
  EXPECT_EQ(bed.watched_from(), (std::vector<std::string>{"10", "10", "10"}));
}

TEST(HostileWatch, AListOverTheCapIsRefusedAndTheCacheKeepsWhatItHad) {
  std::atomic<int> lists{0};
  ClientOptions options;
  options.max_answer_bytes = size_t{1} << 20U;
  options.max_attempts = 1;
  Bed bed(
      [&](const std::string& line, Exchange& x) {
        if (!is_watch(line)) {
          // The first list is whole; the watch then fails with 410 and the next list is huge.
          x.send(http_answer(
              200, ++lists == 1 ? kList : R"({"items":[)" + std::string(2U << 20U, ' ') + "]}"));
          return;
        }
        x.send(chunked_head());
        x.send(chunk(event("ERROR", R"({"kind":"Status","code":410,"reason":"Expired"})")));
      },
      options);
  ASSERT_TRUE(bed.wait_for([&](const auto&) { return lists.load() >= 3; }));
  EXPECT_EQ(bed.sink.seen(), (std::vector<std::string>{"begin", "list:a@10", "end"}));
  EXPECT_EQ(bed.reflector.stats().lists, 1U);
}

TEST(HostileApiServer, OneThatNeverAnswersTimesOutWithinTheClientsTime) {
  ScriptedServer server([](const std::string&, Exchange& x) { x.hold(milliseconds(30000)); });
  ClientOptions options;
  options.timeout = milliseconds(300);
  options.max_attempts = 2;
  options.backoff_initial = milliseconds(10);
  Client client(config_for(server), options);
  const auto started = std::chrono::steady_clock::now();
  const auto list = client.list_raw(resources::pods(), "default", {});
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(5000));
  EXPECT_EQ(server.requests().size(), 2U);
}

}  // namespace
}  // namespace tightrope::kube
