// The Kubernetes client against the bed's real API server: every verb, conflicts of both kinds,
// paging, subresources, Events and Leases.
#include "kube/client.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "kube_support.hpp"

namespace tightrope::kube {
namespace {

using nlohmann::json;
using testing::fresh_namespace;
using testing::make_client;
using testing::unique_name;

json config_map(const std::string& name, const json& data) {
  return {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", data}};
}

TEST(KubeClient, CreatesGetsListsAndDeletesAConfigMap) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  auto created = client->create(resources::config_maps(), ns, config_map("a", {{"k", "v"}}));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_FALSE((*created)["metadata"].value("uid", "").empty());

  auto got = client->get(resources::config_maps(), ns, "a");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ((*got)["data"]["k"], "v");

  auto listed = client->list(resources::config_maps(), ns);
  ASSERT_TRUE(listed) << listed.error().message;
  std::set<std::string> names;
  for (const auto& item : listed->items) {
    names.insert(item["metadata"]["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("a") == 1);
  EXPECT_FALSE(listed->resource_version.empty());

  auto removed = client->remove(resources::config_maps(), ns, "a");
  ASSERT_TRUE(removed) << removed.error().message;
  auto gone = client->get(resources::config_maps(), ns, "a");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(gone.error().status.reason, "NotFound");
}

TEST(KubeClient, ListsByLabelAndFieldSelector) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  for (const std::string name : {"x1", "x2", "y1"}) {
    json cm = config_map(name, json::object());
    cm["metadata"]["labels"] = {{"group", name.substr(0, 1)}};
    ASSERT_TRUE(client->create(resources::config_maps(), ns, cm));
  }
  ListOptions by_label;
  by_label.label_selector = "group=x";
  auto xs = client->list(resources::config_maps(), ns, by_label);
  ASSERT_TRUE(xs);
  EXPECT_EQ(xs->items.size(), 2U);
  ListOptions by_field;
  by_field.field_selector = "metadata.name=y1";
  auto ys = client->list(resources::config_maps(), ns, by_field);
  ASSERT_TRUE(ys);
  ASSERT_EQ(ys->items.size(), 1U);
  EXPECT_EQ(ys->items[0]["metadata"]["name"], "y1");
}

TEST(KubeClient, AStaleUpdateIsAConflict) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  auto created = client->create(resources::config_maps(), ns, config_map("c", {{"n", "0"}}));
  ASSERT_TRUE(created);
  json first = *created;
  first["data"]["n"] = "1";
  auto updated = client->update(resources::config_maps(), ns, first);
  ASSERT_TRUE(updated) << updated.error().message;
  json stale = *created;  // still carries the first resourceVersion
  stale["data"]["n"] = "2";
  auto refused = client->update(resources::config_maps(), ns, stale);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kConflict);
  EXPECT_FALSE(refused.error().is_apply_conflict());
  EXPECT_EQ((*client->get(resources::config_maps(), ns, "c"))["data"]["n"], "1");
}

TEST(KubeClient, CreatingTwiceIsAlreadyExists) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  ASSERT_TRUE(client->create(resources::config_maps(), ns, config_map("d", {})));
  auto again = client->create(resources::config_maps(), ns, config_map("d", {}));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::kAlreadyExists);
}

TEST(KubeClient, PatchesWithMergeJsonAndStrategicMergePatches) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  ASSERT_TRUE(client->create(resources::config_maps(), ns, config_map("p", {{"a", "1"}})));
  auto merged =
      client->patch(resources::config_maps(), ns, "p", PatchType::kMerge, {{"data", {{"b", "2"}}}});
  ASSERT_TRUE(merged) << merged.error().message;
  EXPECT_EQ((*merged)["data"], json({{"a", "1"}, {"b", "2"}}));
  auto json_patched = client->patch(resources::config_maps(), ns, "p", PatchType::kJson,
                                    json::array({{{"op", "remove"}, {"path", "/data/a"}}}));
  ASSERT_TRUE(json_patched) << json_patched.error().message;
  EXPECT_EQ((*json_patched)["data"], json({{"b", "2"}}));
  auto strategic = client->patch(resources::config_maps(), ns, "p", PatchType::kStrategicMerge,
                                 {{"metadata", {{"labels", {{"tier", "x"}}}}}});
  ASSERT_TRUE(strategic) << strategic.error().message;
  EXPECT_EQ((*strategic)["metadata"]["labels"]["tier"], "x");
}

TEST(KubeClient, ApplyRefusesAFieldOwnedByAnotherManagerUntilForced) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  auto first = client->apply(resources::config_maps(), ns, config_map("s", {{"owner", "alpha"}}),
                             {"alpha", false});
  ASSERT_TRUE(first) << first.error().message;
  auto clash = client->apply(resources::config_maps(), ns, config_map("s", {{"owner", "beta"}}),
                             {"beta", false});
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.error().kind, ErrorKind::kConflict);
  EXPECT_TRUE(clash.error().is_apply_conflict()) << clash.error().message;
  auto forced = client->apply(resources::config_maps(), ns, config_map("s", {{"owner", "beta"}}),
                              {"beta", true});
  ASSERT_TRUE(forced) << forced.error().message;
  EXPECT_EQ((*forced)["data"]["owner"], "beta");
  bool beta_manages = false;
  for (const auto& entry : (*forced)["metadata"]["managedFields"]) {
    beta_manages = beta_manages || entry.value("manager", "") == "beta";
  }
  EXPECT_TRUE(beta_manages);
}

TEST(KubeClient, DeleteHonoursAUidPrecondition) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  ASSERT_TRUE(client->create(resources::config_maps(), ns, config_map("u", {})));
  DeleteOptions wrong;
  wrong.precondition_uid = "00000000-0000-0000-0000-000000000000";
  wrong.propagation = PropagationPolicy::kForeground;
  auto refused = client->remove(resources::config_maps(), ns, "u", wrong);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kConflict);
  DeleteOptions now;
  now.grace_period_seconds = 0;
  now.propagation = PropagationPolicy::kBackground;
  EXPECT_TRUE(client->remove(resources::config_maps(), ns, "u", now));
}

TEST(KubeClient, PagesThroughTwoThousandConfigMaps) {
  ClientOptions fast;  // the default 50 requests/s would make the set-up take 40 s
  fast.qps = 1000;
  fast.burst = 1000;
  auto client = make_client(fast);
  const std::string ns = fresh_namespace(*client);
  constexpr int kCount = 2000;
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  writers.reserve(4);
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = w; i < kCount; i += 4) {
        json cm = config_map("page-" + std::to_string(i), {});
        cm["metadata"]["labels"] = {{"paged", "yes"}};
        if (!client->create(resources::config_maps(), ns, cm)) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : writers) {
    t.join();
  }
  ASSERT_EQ(failures.load(), 0);
  // Only ours: the controller-manager adds kube-root-ca.crt to a namespace when it gets to it.
  ListOptions page;
  page.label_selector = "paged=yes";
  page.limit = 300;
  int pages = 0;
  std::set<std::string> names;
  for (;;) {
    auto listed = client->list(resources::config_maps(), ns, page);
    ASSERT_TRUE(listed) << listed.error().message;
    ++pages;
    EXPECT_LE(listed->items.size(), 300U);
    for (const auto& item : listed->items) {
      names.insert(item["metadata"]["name"].get<std::string>());
    }
    if (listed->continue_token.empty()) {
      break;
    }
    page.continue_token = listed->continue_token;
    ASSERT_LT(pages, 100);
  }
  EXPECT_EQ(pages, 7);  // 2,000 objects in pages of 300
  EXPECT_EQ(names.size(), static_cast<size_t>(kCount));
  ListOptions ours;
  ours.label_selector = "paged=yes";
  auto all = client->list_all(resources::config_maps(), ns, ours, 500);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->items.size(), static_cast<size_t>(kCount));
}

TEST(KubeClient, WritesStatusThroughTheStatusSubresource) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "st"}}},
                    {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "none"}}})}}}};
  auto created = client->create(resources::pods(), ns, pod);
  ASSERT_TRUE(created) << created.error().message;
  // The scheduler writes the pod's status too (PodScheduled): read-modify-write, retried on a
  // conflict as a controller would.
  Result<json> updated = fail(Error{});
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto current = client->get(resources::pods(), ns, "st");
    ASSERT_TRUE(current);
    json with_status = *current;
    with_status["status"]["conditions"] = json::array(
        {{{"type", "SlurmNodeStateIdle"}, {"status", "True"}, {"message", "from a test"}}});
    updated = client->update_status(resources::pods(), ns, with_status);
    if (updated || updated.error().kind != ErrorKind::kConflict) {
      break;
    }
  }
  ASSERT_TRUE(updated) << updated.error().message;
  auto got = client->get(resources::pods(), ns, "st", "status");
  ASSERT_TRUE(got);
  // The scheduler may add its PodScheduled condition meanwhile, before or after ours.
  const json conditions = (*got)["status"].value("conditions", json::array());
  EXPECT_TRUE(std::any_of(conditions.begin(), conditions.end(), [](const json& c) {
    return c.value("type", "") == "SlurmNodeStateIdle";
  })) << conditions.dump();
  auto applied = client->apply(
      resources::pods(), ns,
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata", {{"name", "st"}}},
       {"status",
        {{"conditions", json::array({{{"type", "SlurmNodeStateDrain"}, {"status", "True"}}})}}}},
      {"tightrope-test", true}, "status");
  ASSERT_TRUE(applied) << applied.error().message;
}

TEST(KubeClient, ReadsAndSetsTheScaleSubresource) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  const json labels = {{"app", "scaled"}};
  const json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "scaled"}}},
      {"spec",
       {{"replicas", 1},
        {"selector", {{"matchLabels", labels}}},
        {"template",
         {{"metadata", {{"labels", labels}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "none"}}})}}}}}}}};
  ASSERT_TRUE(client->create(resources::deployments(), ns, deployment));
  auto scaled = client->set_replicas(resources::deployments(), ns, "scaled", 3);
  ASSERT_TRUE(scaled) << scaled.error().message;
  auto scale = client->get_scale(resources::deployments(), ns, "scaled");
  ASSERT_TRUE(scale);
  EXPECT_EQ((*scale)["kind"], "Scale");
  EXPECT_EQ((*scale)["spec"]["replicas"], 3);
}

TEST(KubeClient, CreatesEventsAndLeases) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  auto event =
      client->create(resources::events(), ns,
                     {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", "e1"}}},
                      {"involvedObject", {{"kind", "ConfigMap"}, {"name", "x"}, {"namespace", ns}}},
                      {"reason", "Tested"},
                      {"message", "a test event"},
                      {"type", "Normal"}});
  ASSERT_TRUE(event) << event.error().message;
  auto lease = client->create(resources::leases(), ns,
                              {{"apiVersion", "coordination.k8s.io/v1"},
                               {"kind", "Lease"},
                               {"metadata", {{"name", "l1"}}},
                               {"spec", {{"holderIdentity", "me"}, {"leaseDurationSeconds", 5}}}});
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "me");
}

TEST(KubeClient, ReadsATokenFileAgainWhenItChanges) {
  auto admin = make_client();
  const std::string ns = fresh_namespace(*admin);
  ASSERT_TRUE(admin->create(
      resources::service_accounts(), ns,
      {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "reader"}}}}));
  const ResourceType token_requests{"", "v1", "serviceaccounts", "ServiceAccount", true};
  auto issued = admin->create(token_requests, ns,
                              {{"apiVersion", "authentication.k8s.io/v1"},
                               {"kind", "TokenRequest"},
                               {"metadata", {{"name", "reader"}}},
                               {"spec", {{"expirationSeconds", 600}}}},
                              "reader", "token");
  ASSERT_TRUE(issued) << issued.error().message;
  const std::string token = (*issued)["status"]["token"];

  const std::string file = ::testing::TempDir() + "/tightrope-token-" + std::to_string(getpid());
  std::ofstream(file) << "not-a-token\n";
  Config config = testing::bed_config();
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  config.token_file = file;
  ClientOptions once;
  once.max_attempts = 1;
  Client client(config, once);
  auto refused = client.get(resources::namespaces(), "", "default");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kUnauthorized);
  // A rotated token (the kubelet rewrites projected tokens) is used from the next request on.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(file) << token << "\n";
  auto known = client.get(resources::namespaces(), "", "default");
  ASSERT_FALSE(known);  // authenticated now, but the account may not read namespaces
  EXPECT_EQ(known.error().kind, ErrorKind::kForbidden) << known.error().message;
  (void)std::remove(file.c_str());
}

TEST(KubeClient, AnUnreachableServerIsUnavailableAfterBoundedRetries) {
  Config config = testing::bed_config();
  config.server = "https://127.0.0.1:1";  // nothing listens on port 1
  ClientOptions options;
  options.max_attempts = 3;
  options.backoff_initial = std::chrono::milliseconds(10);
  Client client(config, options);
  auto r = client.get(resources::namespaces(), "", "default");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kUnavailable);
  EXPECT_TRUE(r.error().transient());
}

TEST(KubeClient, CountsRequestsInItsMetrics) {
  metrics::Registry registry;
  ClientOptions options;
  options.metrics = &registry;
  Client client(testing::bed_config(), options);
  ASSERT_TRUE(client.get(resources::namespaces(), "", "default"));
  EXPECT_FALSE(client.get(resources::namespaces(), "", unique_name("absent")));
  const std::string text = registry.render();
  EXPECT_NE(
      text.find(R"(rest_client_requests_total{verb="get",resource="namespaces",code="200"} 1)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(rest_client_requests_total{verb="get",resource="namespaces",code="404"} 1)"),
      std::string::npos);
}

}  // namespace
}  // namespace tightrope::kube
