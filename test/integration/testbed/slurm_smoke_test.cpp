// The bed's Slurm is real: slurmrestd with JWT auth in front of slurmctld and three dynamic
// slurmd nodes that drain, resume and run jobs.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http.hpp"
#include "testbed.hpp"

namespace tightrope::testing {
namespace {

using nlohmann::json;

constexpr const char* kApi = "/slurm/v0.0.44";

HttpResponse slurm(const std::string& method, const std::string& path, const json& body = {}) {
  HttpRequest r;
  r.method = method;
  r.url = TestBed::var("SLURMRESTD_URL") + kApi + path;
  r.headers = {"X-SLURM-USER-TOKEN: " + TestBed::var("SLURM_JWT"),
               "Content-Type: application/json"};
  if (!body.is_null()) {
    r.body = body.dump();
  }
  return http(r);
}

json ok(const HttpResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  auto doc = json::parse(r.body);
  EXPECT_TRUE(doc.value("errors", json::array()).empty()) << r.body;
  return doc;
}

json node(const std::string& name) {
  // GET /nodes, not /node/{name}: the single-node path can answer with stale allocation data.
  const json doc = ok(slurm("GET", "/nodes"));  // named: a temporary's member dangles in a for
  for (const auto& n : doc["nodes"]) {
    if (n["name"] == name) {
      return n;
    }
  }
  return {};
}

bool has_state(const json& n, const std::string& flag) {
  for (const auto& s : n.value("state", json::array())) {
    if (s == flag) {
      return true;
    }
  }
  return false;
}

// Polls `predicate` every 100 ms for up to `seconds`.
template <typename Predicate>
bool eventually(Predicate predicate, int seconds = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return predicate();
}

TEST(SlurmSmoke, RequestsWithoutATokenAreRefused) {
  HttpRequest r;
  r.url = TestBed::var("SLURMRESTD_URL") + kApi + "/nodes";
  EXPECT_EQ(http(r).status, 401);
}

TEST(SlurmSmoke, ListsThreeIdleDynamicNodes) {
  const auto nodes = ok(slurm("GET", "/nodes"))["nodes"];
  ASSERT_EQ(nodes.size(), 3U) << nodes.dump();
  for (const auto& n : nodes) {
    EXPECT_TRUE(has_state(n, "IDLE")) << n["name"] << " " << n["state"].dump();
    EXPECT_TRUE(has_state(n, "DYNAMIC_NORM")) << n["name"] << " " << n["state"].dump();
    EXPECT_EQ(n["address"], "127.0.0.1");
  }
}

TEST(SlurmSmoke, DrainsANodeWithAReasonAndResumesIt) {
  ok(slurm("POST", "/node/n2", {{"state", {"DRAIN"}}, {"reason", "smoke: maintenance"}}));
  const json drained = node("n2");
  EXPECT_TRUE(has_state(drained, "DRAIN")) << drained["state"].dump();
  EXPECT_EQ(drained["reason"], "smoke: maintenance");
  EXPECT_EQ(drained["reason_set_by_user"], "slurm");

  ok(slurm("POST", "/node/n2", {{"state", {"RESUME"}}}));
  // After RESUME a node is idle+NOT_RESPONDING until slurmctld's next ping (about a second).
  EXPECT_TRUE(eventually([] {
    const json n = node("n2");
    return has_state(n, "IDLE") && !has_state(n, "DRAIN") && !has_state(n, "NOT_RESPONDING");
  })) << node("n2")["state"].dump();
}

TEST(SlurmSmoke, RunsASubmittedJobAndCancelsIt) {
  const json job = {{"job",
                     {{"name", "smoke"},
                      {"partition", TestBed::var("SLURM_PARTITION")},
                      {"tasks", 1},
                      {"current_working_directory", TestBed::var("SLURM_JOB_DIR")},
                      {"environment", {"PATH=/usr/bin:/bin"}},
                      {"script", "#!/bin/sh\nsleep 120\n"}}}};
  const auto submitted = ok(slurm("POST", "/job/submit", job));
  const std::string id = std::to_string(submitted["job_id"].get<int>());

  auto state_of = [&id] {
    const auto jobs = ok(slurm("GET", "/job/" + id))["jobs"];
    return jobs.empty() ? std::string{} : jobs[0]["job_state"][0].get<std::string>();
  };
  EXPECT_TRUE(eventually([&] { return state_of() == "RUNNING"; })) << state_of();
  const auto running = ok(slurm("GET", "/job/" + id))["jobs"][0];
  const std::string host = running["nodes"];
  EXPECT_TRUE(eventually([&] { return has_state(node(host), "MIXED"); }))
      << node(host)["state"].dump();

  ok(slurm("DELETE", "/job/" + id));
  EXPECT_TRUE(eventually([&] { return state_of() == "CANCELLED"; })) << state_of();
  EXPECT_TRUE(eventually([&] { return has_state(node(host), "IDLE"); }))
      << node(host)["state"].dump();
}

}  // namespace
}  // namespace tightrope::testing
