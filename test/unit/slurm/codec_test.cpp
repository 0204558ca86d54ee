#include "slurm/codec.hpp"

#include <gtest/gtest.h>

namespace tightrope::slurm {
namespace {

using nlohmann::json;

json number(int64_t n) {
  return {{"set", true}, {"infinite", false}, {"number", n}};
}

// A node as slurmrestd 26.05 reports it (fields we do not read left out).
json drained_node() {
  return {{"name", "n1"},
          {"hostname", "vm"},
          {"address", "127.0.0.1"},
          {"state", {"IDLE", "DRAIN", "DYNAMIC_NORM"}},
          {"reason", "slurm-operator: pod cordoned"},
          {"reason_set_by_user", "slurm"},
          {"reason_changed_at", number(1796203747)},
          {"comment", R"({"namespace":"default","podName":"ns1-0"})"},
          {"extra", R"({"tightrope.slurm.net/host":{"cgroup":"v2"}})"},
          {"features", {"ns1"}},
          {"active_features", {"ns1"}},
          {"topology", "topo-switch:s1,topo-block:b1"},
          {"cpus", 2},
          {"alloc_cpus", 0},
          {"real_memory", 1000},
          {"alloc_memory", 0},
          {"gres", ""},
          {"reservation", "tightrope-check-n1"},
          {"partitions", {"ns1", "all"}},
          {"boot_time", number(1796201068)},
          {"last_busy", number(1796203715)},
          {"next_state_after_reboot", {"INVALID"}},
          {"energy", json::object()}};
}

TEST(DecodeNodes, ReadsTheFieldsOfTheModel) {
  const json doc = {{"nodes", {drained_node()}}, {"last_update", number(1796203800)}};
  const auto list = decode_nodes(doc, kV0044);
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->nodes.size(), 1U);
  const Node& n = list->nodes[0];
  EXPECT_EQ(n.name, "n1");
  EXPECT_EQ(n.base_state(), "IDLE");
  EXPECT_EQ(n.flags(), (std::vector<std::string>{"DRAIN", "DYNAMIC_NORM"}));
  EXPECT_TRUE(n.drain());
  EXPECT_FALSE(n.busy());
  EXPECT_EQ(n.reason, "slurm-operator: pod cordoned");
  EXPECT_EQ(n.reason_set_by, "slurm");
  EXPECT_EQ(n.reason_changed_at, Time(std::chrono::seconds(1796203747)));
  EXPECT_EQ(n.comment, R"({"namespace":"default","podName":"ns1-0"})");
  EXPECT_EQ(n.extra, R"({"tightrope.slurm.net/host":{"cgroup":"v2"}})");
  EXPECT_EQ(n.features, std::vector<std::string>{"ns1"});
  EXPECT_EQ(n.topology, "topo-switch:s1,topo-block:b1");
  EXPECT_EQ(n.cpus, 2);
  EXPECT_EQ(n.real_memory_mib, 1000);
  EXPECT_EQ(n.address, "127.0.0.1");
  EXPECT_EQ(list->last_update, Time(std::chrono::seconds(1796203800)));
}

TEST(DecodeNodes, AnUnsetTimeIsNoTime) {
  json node = drained_node();
  node["reason_changed_at"] = {{"set", false}, {"infinite", false}, {"number", 0}};
  const auto list = decode_nodes({{"nodes", {node}}}, kV0044);
  ASSERT_TRUE(list.ok());
  EXPECT_FALSE(list->nodes[0].reason_changed_at.has_value());
}

TEST(DecodeNodes, ATimeNoTimePointHoldsIsNoTime) {
  json node = drained_node();
  node["reason_changed_at"] = {{"set", true}, {"infinite", false}, {"number", 17962060879}};
  const auto list = decode_nodes({{"nodes", {node}}}, kV0044);
  ASSERT_TRUE(list.ok());
  EXPECT_FALSE(list->nodes[0].reason_changed_at.has_value()) << "year 2539: no time is meant";
}

TEST(DecodeNodes, AMixedNodeWithAllocatedCpusIsBusy) {
  json node = drained_node();
  node["state"] = {"MIXED", "DYNAMIC_NORM"};
  node["alloc_cpus"] = 1;
  const auto list = decode_nodes({{"nodes", {node}}}, kV0044);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->nodes[0].base_state(), "MIXED");
  EXPECT_TRUE(list->nodes[0].busy());
}

TEST(DecodeNodes, AWrongTypeIsAProtocolErrorNamingTheField) {
  json node = drained_node();
  node["cpus"] = "two";
  const auto list = decode_nodes({{"nodes", {drained_node(), node}}}, kV0044);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.error().kind, ErrorKind::kProtocol);
  EXPECT_NE(list.error().message.find("nodes[1].cpus"), std::string::npos) << list.error().message;
}

TEST(DecodeNodes, ADocumentWithoutNodesIsAProtocolError) {
  const auto list = decode_nodes({{"errors", json::array()}}, kV0044);
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("nodes: expected a list"), std::string::npos);
}

TEST(DecodeNodes, ANodeWithoutANameIsRejected) {
  const auto list = decode_nodes({{"nodes", {json{{"state", {"IDLE"}}}}}}, kV0044);
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("nodes[0].name"), std::string::npos);
}

// Only `fields` of each item: what a client keeps of a list as it parses it.
json keep_only(const json& item, const std::vector<std::string>& fields) {
  json out = json::object();
  for (const auto& f : fields) {
    if (item.contains(f)) {
      out[f] = item[f];
    }
  }
  return out;
}

TEST(DecodeNodes, NodeFieldsAreEverythingTheDecoderReads) {
  const json full = drained_node();
  const json kept = keep_only(full, node_fields(kV0044));
  EXPECT_FALSE(kept.contains("energy"));
  const auto a = decode_nodes({{"nodes", {full}}}, kV0044);
  const auto b = decode_nodes({{"nodes", {kept}}}, kV0044);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->nodes, b->nodes);
}

TEST(DecodeJobs, ReadsStateNodesAndAnUnlimitedTimeLimit) {
  const json job = {{"job_id", 10},
                    {"name", "sample"},
                    {"user_name", "slurm"},
                    {"partition", "ns1"},
                    {"job_state", {"RUNNING"}},
                    {"nodes", "n2"},
                    {"start_time", number(1796203747)},
                    {"time_limit", {{"set", false}, {"infinite", true}, {"number", 0}}}};
  const auto list = decode_jobs({{"jobs", {job}}}, kV0044);
  ASSERT_TRUE(list.ok()) << list.error().message;
  const Job& j = list->jobs[0];
  EXPECT_EQ(j.id, 10);
  EXPECT_TRUE(j.has("RUNNING"));
  EXPECT_EQ(j.nodes, "n2");
  EXPECT_EQ(j.user, "slurm");
  EXPECT_FALSE(j.time_limit.has_value());
  EXPECT_EQ(j.start_time, Time(std::chrono::seconds(1796203747)));
}

TEST(DecodeJobs, JobFieldsAreEverythingTheDecoderReads) {
  const json job = {{"job_id", 11},
                    {"name", "sample"},
                    {"user_name", "slurm"},
                    {"account", "physics"},
                    {"partition", "ns1"},
                    {"state_reason", "None"},
                    {"job_state", {"COMPLETED"}},
                    {"nodes", "n[1-2]"},
                    {"start_time", number(1796203747)},
                    {"end_time", number(1796203800)},
                    {"time_limit", number(30)},
                    {"command", "/bin/true"}};
  const json kept = keep_only(job, job_fields(kV0044));
  EXPECT_FALSE(kept.contains("command"));
  const auto a = decode_jobs({{"jobs", {job}}}, kV0044);
  const auto b = decode_jobs({{"jobs", {kept}}}, kV0044);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->jobs, b->jobs);
  EXPECT_EQ(b->jobs[0].account, "physics");
  EXPECT_EQ(b->jobs[0].state_reason, "None");
}

TEST(DecodeJobs, ReadsAFiniteTimeLimitInMinutes) {
  const json job = {{"job_id", 1}, {"time_limit", number(90)}};
  const auto list = decode_jobs({{"jobs", {job}}}, kV0044);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->jobs[0].time_limit, std::chrono::minutes(90));
}

TEST(DecodeReservations, AcceptsListsAsStringsOrArrays) {
  const json r = {{"name", "maint"},           {"node_list", "n[1-2]"},
                  {"users", "root,slurm"},     {"flags", {"MAINT", "IGNORE_JOBS"}},
                  {"start_time", number(100)}, {"end_time", number(200)}};
  const auto list = decode_reservations({{"reservations", {r}}}, kV0044);
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ((*list)[0].nodes, "n[1-2]");
  EXPECT_EQ((*list)[0].users, (std::vector<std::string>{"root", "slurm"}));
  EXPECT_EQ((*list)[0].flags, (std::vector<std::string>{"MAINT", "IGNORE_JOBS"}));
}

TEST(DecodePing, TakesTheRespondingController) {
  const json doc = {{"pings",
                     {{{"hostname", "a"}, {"responding", false}, {"mode", "primary"}},
                      {{"hostname", "b"}, {"responding", true}, {"mode", "backup"}}}}};
  const auto ping = decode_ping(doc, kV0044);
  ASSERT_TRUE(ping.ok());
  EXPECT_EQ(ping->hostname, "b");
  EXPECT_TRUE(ping->responding);
}

TEST(DecodePing, ReportsAControllerThatIsDown) {
  const json doc = {{"pings", {{{"hostname", "vm"}, {"pinged", "DOWN"}, {"responding", false}}}}};
  const auto ping = decode_ping(doc, kV0044);
  ASSERT_TRUE(ping.ok());
  EXPECT_FALSE(ping->responding);
}

TEST(DecodeDiag, ReadsTheControllersStartTime) {
  const json doc = {{"statistics",
                     {{"req_time", number(2000)},
                      {"req_time_start", number(1000)},
                      {"server_thread_count", 3},
                      {"jobs_running", 2}}}};
  const auto diag = decode_diag(doc, kV0044);
  ASSERT_TRUE(diag.ok());
  EXPECT_EQ(diag->req_time_start, Time(std::chrono::seconds(1000)));
  EXPECT_EQ(diag->jobs_running, 2);
}

TEST(DecodeErrors, ReadsEveryEntry) {
  const json doc = {{"errors",
                     {{{"description", "Failure to update node n1"},
                       {"error_number", 2180},
                       {"error", "Invalid node state transition"},
                       {"source", "_update_node"}}}}};
  const auto e = decode_errors(doc);
  ASSERT_EQ(e.size(), 1U);
  EXPECT_EQ(e[0].error_number, 2180);
  EXPECT_EQ(e[0].error, "Invalid node state transition");
}

TEST(EncodeNodeUpdate, WritesOnlyWhatIsSetWithTheVersionsFieldNames) {
  NodeUpdate u;
  u.state = {"DRAIN"};
  u.reason = "maintenance";
  u.topology = "";
  u.active_features = std::vector<std::string>{"gpu"};
  EXPECT_EQ(encode_node_update(u, kV0044), (json{{"state", {"DRAIN"}},
                                                 {"reason", "maintenance"},
                                                 {"topology_str", ""},
                                                 {"features_act", {"gpu"}}}));
}

TEST(EncodeJobSubmission, PutsTheScriptInsideTheJob) {
  JobSubmission j;
  j.name = "x";
  j.script = "#!/bin/sh\ntrue\n";
  j.working_directory = "/tmp";
  j.time_limit = std::chrono::minutes(5);
  const json doc = encode_job_submission(j, kV0044);
  EXPECT_EQ(doc["job"]["script"], "#!/bin/sh\ntrue\n");
  EXPECT_EQ(doc["job"]["time_limit"]["number"], 5);
  EXPECT_FALSE(doc["job"].contains("partition"));
}

TEST(DecodeJobs, ReadsFlagsAdminCommentAndPriority) {
  const json job = {{"job_id", 7},
                    {"job_state", {"PENDING"}},
                    {"flags", {"EXACT_MEMORY_REQUESTED", "EXTERNAL_JOB"}},
                    {"admin_comment", R"({"pods":["ns/a"]})"},
                    {"priority", number(4000)}};
  const auto list = decode_jobs({{"jobs", {job}}}, kV0044);
  ASSERT_TRUE(list.ok()) << list.error().message;
  const Job& j = list->jobs[0];
  EXPECT_TRUE(j.external());
  EXPECT_TRUE(j.active());
  EXPECT_EQ(j.admin_comment, R"({"pods":["ns/a"]})");
  EXPECT_EQ(j.priority, 4000);
  const auto kept = decode_jobs({{"jobs", {keep_only(job, job_fields(kV0044))}}}, kV0044);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->jobs, list->jobs);
}

TEST(EncodeExternalJob, AsksForWholeNodesOnePodATaskAndLeavesDefaultsUnset) {
  ExternalJob j;
  j.name = "train";
  j.tasks = 4;
  j.min_nodes = 4;
  j.max_nodes = 4;
  j.tasks_per_node = 1;
  j.cpus_per_task = 2;
  j.excluded_nodes = {"k1"};
  j.user = "alice";
  j.tres_per_task = "gres/gpu:1";
  j.admin_comment = R"({"pods":["ml/train-0"]})";
  const json desc = encode_external_job(j, kV0044);
  EXPECT_EQ(desc["flags"], json::array({"EXTERNAL_JOB"}));
  EXPECT_EQ(desc["shared"], json::array({"none"}));
  EXPECT_EQ(desc["tasks_per_node"], 1);
  EXPECT_EQ(desc["excluded_nodes"], json::array({"k1"}));
  EXPECT_EQ(desc["user_id"], "alice");
  EXPECT_EQ(desc["tres_per_task"], "gres/gpu:1");
  EXPECT_FALSE(desc.contains("script"));
  EXPECT_FALSE(desc.contains("memory_per_cpu"));
  EXPECT_FALSE(desc.contains("partition"));
  EXPECT_FALSE(desc.contains("time_limit"));
  j.exclusive = false;
  EXPECT_EQ(encode_external_job(j, kV0044)["shared"], json::array());
}

TEST(DecodeJobAllocation, ReadsCpusAndMemoryNodeByNode) {
  const json job = {
      {"job_id", 4},
      {"job_resources",
       {{"nodes",
         {{"allocation",
           {{{"name", "k2"}, {"cpus", {{"count", 4}}}, {"memory", {{"allocated", 200}}}},
            {{"name", "k3"}, {"cpus", {{"count", 2}}}, {"memory", {{"allocated", 100}}}}}}}}}}};
  const auto a = decode_job_allocation(job, kV0044);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_EQ(a->size(), 2U);
  EXPECT_EQ((*a)[0], (JobNodeAllocation{"k2", 4, 200}));
  EXPECT_EQ((*a)[1].node, "k3");
  const auto none = decode_job_allocation(json{{"job_id", 5}}, kV0044);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace tightrope::slurm
