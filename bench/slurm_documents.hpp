// BENCHMARK ONLY: slurmrestd's GET /nodes answer, synthetic but of the shape and with the 60 keys
// per node that Slurm 26.05 returns (docs/testbed.md): about 2.7 KB a node.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tightrope::bench {

inline nlohmann::json node_document(int i) {
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
  return n;
}

// The whole answer for `count` nodes, written node by node: no DOM of the whole list is held.
inline std::string nodes_document(int count) {
  std::string out = R"({"errors":[],"last_update":{"infinite":false,"number":1,"set":true},)"
                    R"("nodes":[)";
  for (int i = 0; i < count; ++i) {
    if (i > 0) {
      out += ',';
    }
    out += node_document(i).dump();
  }
  out += R"(],"warnings":[]})";
  return out;
}

}  // namespace tightrope::bench
