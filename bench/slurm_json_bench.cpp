// What it costs to decode slurmrestd's GET /nodes answer, the document the Slurm change feed
// reads about once a second: a full DOM (nlohmann::json) against simdjson's on-demand reader
// that touches only the fields a controller keeps. The document is synthetic but has the shape
// and the 60 keys per node that Slurm 26.05 returns (docs/testbed.md).
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>

namespace {

std::string nodes_document(int count) {
  nlohmann::json nodes = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    nlohmann::json n = {
        {"name", "gpu-" + std::to_string(i)},
        {"hostname", "gpu-" + std::to_string(i)},
        {"address", "127.0.0.1"},
        {"port", 20000 + i},
        {"state", {"IDLE", "DYNAMIC_NORM"}},
        {"reason", ""},
        {"reason_set_by_user", ""},
        {"reason_changed_at", {{"set", true}, {"infinite", false}, {"number", 1796203747}}},
        {"comment", R"({"namespace":"slurm","podName":"gpu-)" + std::to_string(i) + R"("})"},
        {"features", {"gpu"}},
        {"active_features", {"gpu"}},
        {"topology", "topo-switch:s1,topo-block:b1"},
        {"partitions", {"gpu"}},
        {"cpus", 128},
        {"alloc_cpus", 0},
        {"alloc_idle_cpus", 128},
        {"real_memory", 1031000},
        {"alloc_memory", 0},
        {"free_mem", {{"set", true}, {"infinite", false}, {"number", 1020000}}},
        {"tres", "cpu=128,mem=1031000M,billing=128,gres/gpu=8"},
        {"tres_used", ""},
        {"gres", "gpu:h200:8"},
        {"gres_used", "gpu:h200:0(IDX:N/A)"},
        {"version", "26.05.5"},
        {"boot_time", {{"set", true}, {"infinite", false}, {"number", 1796201068}}},
        {"last_busy", {{"set", true}, {"infinite", false}, {"number", 1796203715}}},
    };
    // Pad to the 60 keys a real node carries with fields nobody reads.
    for (int k = static_cast<int>(n.size()); k < 60; ++k) {
      n["unread_" + std::to_string(k)] = {{"set", false}, {"infinite", false}, {"number", 0}};
    }
    nodes.push_back(std::move(n));
  }
  return nlohmann::json{{"nodes", nodes},
                        {"last_update", {{"set", true}, {"infinite", false}, {"number", 1}}},
                        {"errors", nlohmann::json::array()},
                        {"warnings", nlohmann::json::array()}}
      .dump();
}

void BM_NodesFullDom(benchmark::State& state) {
  const std::string doc = nodes_document(static_cast<int>(state.range(0)));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the library idiom
    auto parsed = nlohmann::json::parse(doc);
    size_t idle = 0;
    for (const auto& n : parsed["nodes"]) {
      idle += n["state"][0].get_ref<const std::string&>() == "IDLE" ? 1 : 0;
    }
    benchmark::DoNotOptimize(idle);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * doc.size()));
  state.counters["doc_bytes"] = static_cast<double>(doc.size());
}

void BM_NodesOnDemand(benchmark::State& state) {
  const simdjson::padded_string doc(nodes_document(static_cast<int>(state.range(0))));
  simdjson::ondemand::parser parser;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the library idiom
    auto parsed = parser.iterate(doc);
    size_t idle = 0;
    for (auto n : parsed["nodes"].get_array()) {
      std::string_view name = n["name"].get_string();
      benchmark::DoNotOptimize(name);
      for (auto s : n["state"].get_array()) {
        idle += std::string_view(s.get_string()) == "IDLE" ? 1 : 0;
        break;
      }
    }
    benchmark::DoNotOptimize(idle);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * doc.size()));
  state.counters["doc_bytes"] = static_cast<double>(doc.size());
}

BENCHMARK(BM_NodesFullDom)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NodesOnDemand)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
