// What it costs to decode slurmrestd's GET /nodes answer, the document the Slurm change feed
// reads about once a second: a full DOM (nlohmann::json) against simdjson's on-demand reader
// that touches only the fields a controller keeps (bench/slurm_documents.hpp).
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>

#include "slurm_documents.hpp"

namespace {

using tightrope::bench::nodes_document;

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
