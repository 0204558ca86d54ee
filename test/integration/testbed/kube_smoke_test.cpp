// The bed's Kubernetes is real: TLS with client certificates, RBAC, CRDs, and watches that
// deliver what is written.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http.hpp"
#include "testbed.hpp"

namespace tightrope::testing {
namespace {

using nlohmann::json;

KubeAccess kube() {
  return kube_access_from(TestBed::var("KUBECONFIG"));
}

std::string unique(const std::string& prefix) {
  return prefix + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
}

json must(const HttpResponse& r, long want) {
  EXPECT_EQ(r.status, want) << r.body;
  return r.body.empty() ? json{} : json::parse(r.body);
}

// Watches `list_path` from `resource_version` until an event of `type` for object `name` arrives
// (or 20 s pass); returns that event, or null.
json await_event(const std::string& list_path, const std::string& resource_version,
                 const std::string& type, const std::string& name) {
  auto req = kube().request(
      "GET", list_path + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=20&resourceVersion=" +
                 resource_version);
  req.timeout_ms = 25000;
  json found;
  http_stream_lines(req, [&](std::string_view line) {
    const json event = json::parse(line);
    if (event.at("type") == type && event.at("object").at("metadata").value("name", "") == name) {
      found = event;
      return false;
    }
    return true;
  });
  return found;
}

TEST(KubeSmoke, ApiServerIsReadyOverVerifiedTls) {
  const auto r = http(kube().request("GET", "/readyz"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST(KubeSmoke, AnonymousRequestsCannotReadTheApi) {
  auto req = kube().request("GET", "/api/v1/namespaces");
  req.cert_file.clear();
  req.key_file.clear();
  // Anonymous authentication stays on as in a default cluster (probes read /readyz), and RBAC
  // gives system:anonymous nothing else.
  EXPECT_EQ(http(req).status, 403);
}

TEST(KubeSmoke, ANewNamespaceShowsInAWatch) {
  const auto list = must(http(kube().request("GET", "/api/v1/namespaces")), 200);
  const std::string rv = list.at("metadata").at("resourceVersion");
  const std::string name = unique("smoke-ns");
  must(http(kube().request(
           "POST", "/api/v1/namespaces",
           json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}}
               .dump())),
       201);
  const json event = await_event("/api/v1/namespaces", rv, "ADDED", name);
  ASSERT_FALSE(event.is_null()) << "no ADDED event for namespace " << name;
  EXPECT_EQ(event["object"]["status"]["phase"], "Active");
  must(http(kube().request("DELETE", "/api/v1/namespaces/" + name)), 200);
}

TEST(KubeSmoke, AConfigMapUpdateShowsInAWatch) {
  const std::string path = "/api/v1/namespaces/default/configmaps";
  const std::string name = unique("smoke-cm");
  must(http(kube().request("POST", path,
                           json{{"apiVersion", "v1"},
                                {"kind", "ConfigMap"},
                                {"metadata", {{"name", name}}},
                                {"data", {{"slurm.conf", "ClusterName=a\n"}}}}
                               .dump())),
       201);
  const auto created = must(http(kube().request("GET", path + "/" + name)), 200);
  const std::string rv = created["metadata"]["resourceVersion"];
  must(http(kube().request("PATCH", path + "/" + name,
                           json{{"data", {{"slurm.conf", "ClusterName=b\n"}}}}.dump())),
       200);
  const json event = await_event(path, rv, "MODIFIED", name);
  ASSERT_FALSE(event.is_null()) << "no MODIFIED event for configmap " << name;
  EXPECT_EQ(event["object"]["data"]["slurm.conf"], "ClusterName=b\n");
  must(http(kube().request("DELETE", path + "/" + name)), 200);
}

TEST(KubeSmoke, ACustomResourceDefinitionServesAndWatchesItsKind) {
  const std::string plural = "widgets";
  const std::string group = "testbed.tightrope.dev";
  const json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", plural + "." + group}}},
      {"spec",
       {{"group", group},
        {"scope", "Namespaced"},
        {"names", {{"plural", plural}, {"singular", "widget"}, {"kind", "Widget"}}},
        {"versions",
         json::array({{{"name", "v1"},
                       {"served", true},
                       {"storage", true},
                       {"schema",
                        {{"openAPIV3Schema",
                          {{"type", "object"},
                           {"properties",
                            {{"spec",
                              {{"type", "object"},
                               {"properties", {{"size", {{"type", "integer"}}}}}}}}}}}}}}})}}}};
  const auto post = http(kube().request(
      "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.dump()));
  ASSERT_TRUE(post.status == 201 || post.status == 409) << post.body;  // 409: an earlier run's
  const std::string path = "/apis/" + group + "/v1/namespaces/default/" + plural;
  // The new resource is served once the CRD is Established (discovery catches up in ~1 s).
  HttpResponse list;
  for (int i = 0; i < 100; ++i) {
    list = http(kube().request("GET", path));
    if (list.status == 200) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(list.status, 200) << list.body;
  const std::string rv = json::parse(list.body)["metadata"]["resourceVersion"];
  const std::string name = unique("w");
  must(http(kube().request("POST", path,
                           json{{"apiVersion", group + "/v1"},
                                {"kind", "Widget"},
                                {"metadata", {{"name", name}}},
                                {"spec", {{"size", 3}}}}
                               .dump())),
       201);
  const json event = await_event(path, rv, "ADDED", name);
  ASSERT_FALSE(event.is_null()) << "no ADDED event for widget " << name;
  EXPECT_EQ(event["object"]["spec"]["size"], 3);
  // The schema is enforced: a string where an integer belongs is rejected with the field named.
  const auto bad = http(kube().request("POST", path,
                                       json{{"apiVersion", group + "/v1"},
                                            {"kind", "Widget"},
                                            {"metadata", {{"name", name + "-bad"}}},
                                            {"spec", {{"size", "three"}}}}
                                           .dump()));
  EXPECT_EQ(bad.status, 422);
  EXPECT_NE(bad.body.find("spec.size"), std::string::npos) << bad.body;
  must(http(kube().request("DELETE", path + "/" + name)), 200);
}

TEST(KubeSmoke, KubectlWorksWithTheBedsKubeconfig) {
  const std::string cmd = TestBed::var("KUBECTL") + " --kubeconfig " + TestBed::var("KUBECONFIG") +
                          " get namespace kube-system -o name 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::string out(256, '\0');
  out.resize(fread(out.data(), 1, out.size(), pipe.get()));
  EXPECT_EQ(out, "namespace/kube-system\n");
}

}  // namespace
}  // namespace tightrope::testing
