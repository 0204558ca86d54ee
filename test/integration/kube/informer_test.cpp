// Informers against the bed's real API server: a cache that follows adds, updates and deletes,
// survives a forced 410 Gone without losing a final state, and rides out an API server that
// goes away and comes back without spinning.
#include "kube/informer.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "http.hpp"
#include "kube_support.hpp"
#include "testbed.hpp"

namespace tightrope::kube {
namespace {

using nlohmann::json;
using testing::eventually;
using testing::fresh_namespace;
using testing::make_client;
using tightrope::testing::TestBed;

json config_map(const std::string& name, const json& labels, const json& data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"data", data}};
}

json pod_template(const std::string& name, const std::string& image) {
  return {
      {"apiVersion", "v1"},
      {"kind", "PodTemplate"},
      {"metadata", {{"name", name}}},
      {"template", {{"spec", {{"containers", json::array({{{"name", "c"}, {"image", image}}})}}}}}};
}

// The names and resourceVersions the server holds now.
std::map<std::string, std::string> server_state(Client& client, const ResourceType& type,
                                                const std::string& ns) {
  std::map<std::string, std::string> out;
  auto list = client.list(type, ns);
  EXPECT_TRUE(list);
  for (const auto& item : list->items) {
    out[item["metadata"]["name"]] = item["metadata"]["resourceVersion"];
  }
  return out;
}

template <typename T>
std::map<std::string, std::string> cache_state(const Store<T>& store) {
  std::map<std::string, std::string> out;
  for (const auto& object : store.list()) {
    out[object->meta.name] = object->meta.resource_version;
  }
  return out;
}

TEST(Informer, FollowsAddsUpdatesAndDeletesWithIndexes) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  // What the handlers touch outlives the informer: its thread may still deliver (the namespace's
  // kube-root-ca.crt, say) until the informer is destroyed.
  std::mutex mu;
  std::vector<std::string> seen;
  Informer<Document> informer(*client, resources::config_maps(), ns, decode_document);
  informer.store().add_index("tier", index::by_label<Document>("tier"));
  informer.on_add([&](const auto& o) {
    std::lock_guard lock(mu);
    seen.push_back("add " + o->meta.name);
  });
  informer.on_update([&](const auto&, const auto& o) {
    std::lock_guard lock(mu);
    seen.push_back("update " + o->meta.name);
  });
  informer.on_delete([&](const Deleted<Document>& d) {
    std::lock_guard lock(mu);
    seen.push_back("delete " + d.object->meta.name);
  });
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync(std::chrono::seconds(20)));

  ASSERT_TRUE(client->create(resources::config_maps(), ns,
                             config_map("one", {{"tier", "gold"}}, {{"v", "1"}})));
  ASSERT_TRUE(
      client->create(resources::config_maps(), ns, config_map("two", {{"tier", "lead"}}, {})));
  ASSERT_TRUE(client->patch(resources::config_maps(), ns, "one", PatchType::kMerge,
                            {{"data", {{"v", "2"}}}}));
  ASSERT_TRUE(client->remove(resources::config_maps(), ns, "two"));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return std::find(seen.begin(), seen.end(), "delete two") != seen.end();
  }));
  auto one = informer.store().get(ns + "/one");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->doc["data"]["v"], "2");
  EXPECT_EQ(informer.store().by_index("tier", "gold").size(), 1U);
  EXPECT_TRUE(informer.store().by_index("tier", "lead").empty());
  std::lock_guard lock(mu);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "add one"), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), "update one"), seen.end());
}

TEST(Informer, ResyncsEveryCachedObjectWhenAsked) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  ASSERT_TRUE(client->create(resources::config_maps(), ns, config_map("r", {}, {})));
  std::atomic<int> resyncs{0};  // before the informer, whose resyncs touch it until it stops
  Informer<MetaOnly> informer(*client, resources::config_maps(), ns, decode_meta_only);
  informer.set_resync_period(std::chrono::milliseconds(100));
  informer.on_update([&](const auto& before, const auto& after) {
    if (before == after) {
      ++resyncs;
    }
  });
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync(std::chrono::seconds(20)));
  EXPECT_TRUE(eventually([&] { return resyncs.load() >= 4; }));  // r and kube-root-ca.crt, twice
}

// etcd's current revision, then a compaction at it: every older revision is gone.
void compact_etcd() {
  tightrope::testing::HttpRequest range;
  range.method = "POST";
  range.url = TestBed::var("ETCD_URL") + "/v3/kv/range";
  range.body = R"({"key":"AA=="})";
  const auto answer = tightrope::testing::http(range);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::string revision = json::parse(answer.body)["header"]["revision"];
  tightrope::testing::HttpRequest compact;
  compact.method = "POST";
  compact.url = TestBed::var("ETCD_URL") + "/v3/kv/compaction";
  compact.body = json({{"revision", revision}, {"physical", true}}).dump();
  const auto compacted = tightrope::testing::http(compact);
  ASSERT_EQ(compacted.status, 200) << compacted.body;
}

TEST(Informer, RelistsAfterAForced410GoneAndMissesNoFinalState) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  ReflectorOptions options;
  options.watch_timeout_seconds = 1;  // the server ends each watch within 2 s
  // The first add blocks the informer's thread, as a slow handler would, until released. What
  // the handlers touch is declared before the informer, which outlives none of it.
  std::mutex mu;
  std::condition_variable cv;
  bool hold = true;
  std::set<std::string> deleted;
  Informer<MetaOnly> informer(*client, resources::pod_templates(), ns, decode_meta_only, options);
  informer.on_add([&](const auto&) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return !hold; });
  });
  informer.on_delete([&](const Deleted<MetaOnly>& d) {
    std::lock_guard lock(mu);
    deleted.insert(d.object->meta.name);
  });
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync(std::chrono::seconds(20)));
  ASSERT_TRUE(client->create(resources::pod_templates(), ns, pod_template("a", "one")));
  ASSERT_TRUE(client->create(resources::pod_templates(), ns, pod_template("b", "one")));
  ASSERT_TRUE(client->create(resources::pod_templates(), ns, pod_template("c", "one")));
  ASSERT_TRUE(client->patch(resources::pod_templates(), ns, "a", PatchType::kMerge,
                            {{"metadata", {{"labels", {{"changed", "yes"}}}}}}));
  ASSERT_TRUE(client->remove(resources::pod_templates(), ns, "c"));
  // Let the server end the blocked watch, change more while nobody watches, and compact etcd
  // past everything the informer has seen.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_TRUE(client->create(resources::pod_templates(), ns, pod_template("d", "one")));
  ASSERT_TRUE(client->remove(resources::pod_templates(), ns, "b"));
  compact_etcd();
  {
    std::lock_guard lock(mu);
    hold = false;
  }
  cv.notify_all();

  const auto want = server_state(*client, resources::pod_templates(), ns);
  ASSERT_EQ(want.size(), 2U);  // a and d
  EXPECT_TRUE(eventually([&] { return cache_state(informer.store()) == want; }))
      << "the cache holds " << cache_state(informer.store()).size() << " objects";
  EXPECT_GE(informer.stats().relists_gone, 1U);
  std::lock_guard lock(mu);
  EXPECT_TRUE(deleted.count("b") == 1 && deleted.count("c") == 1);
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

TEST(InformerWithoutApiServer, RetriesBoundedLogsOnceAndRecovers) {
  ClientOptions quick;
  quick.max_attempts = 2;
  quick.timeout = std::chrono::seconds(3);
  auto client = make_client(quick);
  const std::string ns = fresh_namespace(*client);
  ReflectorOptions options;
  options.backoff_initial = std::chrono::milliseconds(200);
  options.backoff_max = std::chrono::seconds(2);
  Informer<MetaOnly> informer(*client, resources::config_maps(), ns, decode_meta_only, options);
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync(std::chrono::seconds(20)));

  std::mutex mu;
  std::vector<std::string> lines;
  // The sink goes back however the test ends: one left behind would write into this frame.
  struct SinkRestored {
    log::Sink previous;
    bool done = false;
    void restore() {
      if (!done) {
        log::set_sink(previous);
        done = true;
      }
    }
    ~SinkRestored() { restore(); }
  } restored{log::set_sink([&](log::Level, const std::string& line) {
    std::lock_guard lock(mu);
    if (line.find("event=kube.watch") != std::string::npos && line.find(ns) != std::string::npos) {
      lines.push_back(line);
    }
  })};
  const pid_t apiserver = TestBed::pid_of("kube-apiserver");
  ASSERT_EQ(kill(apiserver, SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return tightrope::testing::process_gone(apiserver); }));
  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(8));
  const double cpu_during = cpu_seconds() - cpu_before;
  const uint64_t failures = informer.stats().watch_failures;

  ASSERT_EQ(TestBed::up(), 0);
  auto fresh = make_client();
  ASSERT_TRUE(eventually(
      [&] {
        return static_cast<bool>(
            fresh->create(resources::config_maps(), ns, config_map("after", {}, {})));
      },
      std::chrono::seconds(60)));
  EXPECT_TRUE(eventually([&] { return informer.store().get(ns + "/after") != nullptr; },
                         std::chrono::seconds(30)));
  // The reflector fills the store before it says it recovered: wait for the line before the
  // sink goes back, or it lands in the default sink and the count misses it.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
      return line.find("event=kube.watch.recovered") != std::string::npos;
    });
  }));
  restored.restore();

  std::cout << "API server down 8 s: " << failures << " failed watch/list attempts, " << cpu_during
            << " CPU seconds\n";
  // Bounded retries: a few attempts in 8 s with backoff up to 2 s, not thousands.
  EXPECT_GE(failures, 1U);
  EXPECT_LE(failures, 15U);
  EXPECT_LT(cpu_during, 0.5) << "CPU seconds used while the API server was down";
  std::lock_guard lock(mu);
  int failing = 0;
  int recovered = 0;
  for (const auto& line : lines) {
    failing += line.find("event=kube.watch.failing") != std::string::npos ? 1 : 0;
    recovered += line.find("event=kube.watch.recovered") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(failing, 1);
  EXPECT_EQ(recovered, 1);
}

}  // namespace
}  // namespace tightrope::kube
