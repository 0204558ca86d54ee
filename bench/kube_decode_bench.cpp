// How fast an informer turns a list of pods into its cache, and what each cached pod costs:
// 10,000 slurmd worker pods as the NodeSet controller creates them (labels, owner reference,
// a full container spec, managed fields, status with Slurm conditions), decoded from one list
// answer into a Store, once keeping whole documents and once as the operator's cache keeps
// them (CachedPod). Writes bench/results/kube_decode.json (path as the first argument).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/object.hpp"
#include "kube/store.hpp"
#include "operator/cached_pod.hpp"

namespace {

using nlohmann::json;
using tightrope::kube::DecodeResult;
using tightrope::kube::Document;
using tightrope::kube::Store;
using tightrope::op::CachedPod;

constexpr int kPods = 10000;

json worker_pod(int i) {
  const std::string name = "gpu-" + std::to_string(i);
  const std::string node = "host-" + std::to_string(i % 1000);
  const json labels = {
      {"app.kubernetes.io/name", "slurmd"},      {"app.kubernetes.io/instance", "gpu"},
      {"app.kubernetes.io/component", "worker"}, {"app.kubernetes.io/part-of", "slurm"},
      {"slinky.slurm.net/nodeset", "gpu"},       {"controller-revision-hash", "gpu-6d5f7c9b8"}};
  const json mount =
      json::array({{{"name", "slurm-config"}, {"mountPath", "/etc/slurm"}, {"readOnly", true}},
                   {{"name", "spool"}, {"mountPath", "/var/spool/slurmd"}},
                   {{"name", "run"}, {"mountPath", "/run"}},
                   {{"name", "kube-api-access-x7k2p"},
                    {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"readOnly", true}}});
  const json container = {
      {"name", "slurmd"},
      {"image", "registry.example.org/tightrope/slurmd:26.05.5"},
      {"imagePullPolicy", "IfNotPresent"},
      {"args",
       json::array({"-D", "-Z", "--conf-server", "slurm-controller.slurm:6817", "--conf",
                    "Features=gpu Gres=gpu:h100:8 CPUs=96 RealMemory=2000000", "-N", name})},
      {"env", json::array({{{"name", "POD_NAME"},
                            {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                           {{"name", "SLURMD_NODENAME"}, {"value", name}}})},
      {"ports", json::array({{{"name", "slurmd"}, {"containerPort", 6818}, {"protocol", "TCP"}}})},
      {"resources",
       {{"limits", {{"nvidia.com/gpu", "8"}}},
        {"requests", {{"cpu", "90"}, {"memory", "1900Gi"}}}}},
      {"readinessProbe",
       {{"exec", {{"command", json::array({"scontrol", "show", "slurmd"})}}},
        {"periodSeconds", 10}}},
      {"lifecycle",
       {{"preStop",
         {{"exec", {{"command", json::array({"/usr/local/bin/slurmd-drain", name})}}}}}}},
      {"securityContext",
       {{"privileged", true}, {"capabilities", {{"add", json::array({"BPF", "SYS_ADMIN"})}}}}},
      {"volumeMounts", mount},
      {"terminationMessagePath", "/dev/termination-log"},
      {"terminationMessagePolicy", "File"}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "slurm"},
        {"uid", "3f2a1c9e-7b44-4d1e-9a7c-" + std::to_string(100000000000 + i)},
        {"resourceVersion", std::to_string(1000000 + i)},
        {"creationTimestamp", "2026-12-02T10:00:00Z"},
        {"labels", labels},
        {"annotations",
         {{"slinky.slurm.net/pod-deletion-cost", "0"},
          {"kubectl.kubernetes.io/default-container", "slurmd"}}},
        {"ownerReferences", json::array({{{"apiVersion", "slinky.slurm.net/v1beta1"},
                                          {"kind", "NodeSet"},
                                          {"name", "gpu"},
                                          {"uid", "8c1d2e3f-0000-4aaa-bbbb-cccccccccccc"},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})},
        {"managedFields",
         json::array(
             {{{"manager", "slurm-operator"},
               {"operation", "Apply"},
               {"apiVersion", "v1"},
               {"time", "2026-12-02T10:00:00Z"},
               {"fieldsType", "FieldsV1"},
               {"fieldsV1",
                {{"f:metadata", {{"f:labels", {{"f:app.kubernetes.io/name", json::object()}}}}},
                 {"f:spec",
                  {{"f:containers", {{R"(k:{"name":"slurmd"})", {{".", json::object()}}}}}}}}}},
              {{"manager", "kubelet"},
               {"operation", "Update"},
               {"apiVersion", "v1"},
               {"time", "2026-12-02T10:00:05Z"},
               {"fieldsType", "FieldsV1"},
               {"subresource", "status"},
               {"fieldsV1",
                {{"f:status",
                  {{"f:conditions", json::object()}, {"f:podIP", json::object()}}}}}}})}}},
      {"spec",
       {{"nodeName", node},
        {"hostname", name},
        {"subdomain", "gpu"},
        {"containers", json::array({container})},
        {"volumes",
         json::array({{{"name", "slurm-config"}, {"configMap", {{"name", "slurm-config"}}}},
                      {{"name", "spool"}, {"emptyDir", json::object()}},
                      {{"name", "run"}, {"emptyDir", {{"medium", "Memory"}}}}})},
        {"tolerations",
         json::array(
             {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
        {"affinity",
         {{"podAntiAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             json::array({{{"topologyKey", "kubernetes.io/hostname"},
                           {"labelSelector",
                            {{"matchLabels", {{"slinky.slurm.net/nodeset", "gpu"}}}}}}})}}}}},
        {"terminationGracePeriodSeconds", 300},
        {"dnsPolicy", "ClusterFirst"},
        {"restartPolicy", "Always"},
        {"schedulerName", "default-scheduler"},
        {"serviceAccountName", "default"}}},
      {"status",
       {{"phase", "Running"},
        {"hostIP", "10.0." + std::to_string(i % 250) + ".1"},
        {"podIP", "10.244." + std::to_string(i / 250) + "." + std::to_string(i % 250)},
        {"startTime", "2026-12-02T10:00:01Z"},
        {"qosClass", "Burstable"},
        {"conditions", json::array({{{"type", "Ready"},
                                     {"status", "True"},
                                     {"lastTransitionTime", "2026-12-02T10:00:05Z"}},
                                    {{"type", "ContainersReady"},
                                     {"status", "True"},
                                     {"lastTransitionTime", "2026-12-02T10:00:05Z"}},
                                    {{"type", "PodScheduled"},
                                     {"status", "True"},
                                     {"lastTransitionTime", "2026-12-02T10:00:00Z"}},
                                    {{"type", "SlurmNodeStateIdle"},
                                     {"status", "True"},
                                     {"lastTransitionTime", "2026-12-02T10:00:06Z"}}})},
        {"containerStatuses",
         json::array(
             {{{"name", "slurmd"},
               {"ready", true},
               {"restartCount", 0},
               {"image", "registry.example.org/tightrope/slurmd:26.05.5"},
               {"imageID",
                "sha256:4b1c0d2e3f4a5b6c7d8e9f00112233445566778899aabbccddeeff0011223344"},
               {"containerID", "containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a0" + std::to_string(i)},
               {"started", true},
               {"state", {{"running", {{"startedAt", "2026-12-02T10:00:03Z"}}}}}}})}}}};
}

const std::string& pod_list() {
  static const std::string text = [] {
    json list = {{"apiVersion", "v1"},
                 {"kind", "PodList"},
                 {"metadata", {{"resourceVersion", "2000000"}}},
                 {"items", json::array()}};
    for (int i = 0; i < kPods; ++i) {
      list["items"].push_back(worker_pod(i));
    }
    return list.dump();
  }();
  return text;
}

DecodeResult decode_document(simdjson::dom::element object, Document* out) {
  return tightrope::kube::decode_document(object, out);
}

template <typename T>
void add_indexes(Store<T>& store) {
  store.add_index(tightrope::kube::index::kNamespace, tightrope::kube::index::by_namespace<T>);
  store.add_index(tightrope::kube::index::kOwnerUid, tightrope::kube::index::by_owner_uid<T>);
}

// Decodes the list into `store` as an informer's first list does.
template <typename T, typename Decode>
size_t fill(Store<T>& store, simdjson::dom::parser& parser, Decode decode) {
  const std::string& text = pod_list();
  simdjson::dom::element doc = parser.parse(text.data(), text.size());
  size_t n = 0;
  for (const auto item : simdjson::dom::array(doc["items"])) {
    auto value = std::make_shared<T>();
    if (decode(item, value.get())) {
      const std::string key = value->meta.key();
      store.put(key, std::move(value));
      ++n;
    }
  }
  return n;
}

template <typename T, typename Decode>
void decode_into_store(benchmark::State& state, Decode decode) {
  simdjson::dom::parser parser;
  for (auto _ : state) {
    Store<T> store;
    add_indexes(store);
    benchmark::DoNotOptimize(fill(store, parser, decode));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(pod_list().size()));
  state.counters["pods"] = kPods;
}

void BM_DecodePodListProjected(benchmark::State& state) {
  decode_into_store<CachedPod>(state, tightrope::op::decode_cached_pod);
}
void BM_DecodePodListFull(benchmark::State& state) {
  decode_into_store<Document>(state, decode_document);
}
BENCHMARK(BM_DecodePodListProjected)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_DecodePodListFull)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Heap bytes the filled store holds, per pod (malloc's own count of bytes in use).
template <typename T, typename Decode>
double bytes_per_cached_pod(Decode decode) {
  simdjson::dom::parser parser;
  (void)pod_list();
  auto store = std::make_unique<Store<T>>();
  add_indexes(*store);
  {
    // The parser's buffers are sized once outside the measurement.
    simdjson::dom::element warm = parser.parse(pod_list().data(), pod_list().size());
    benchmark::DoNotOptimize(warm);
  }
  malloc_trim(0);
  const size_t before = mallinfo2().uordblks;
  fill(*store, parser, decode);
  const size_t after = mallinfo2().uordblks;
  return static_cast<double>(after - before) / kPods;
}

// Keeps each run's bytes/s for the results file.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (const auto it = run.counters.find("bytes_per_second"); it != run.counters.end()) {
        mb_per_s[run.benchmark_name()] = it->second.value / 1e6;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> mb_per_s;
};

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "bench/results/kube_decode.json";
  if (argc > 1 && argv[1][0] != '-') {
    out_path = argv[1];
    --argc;
    ++argv;
  }
  benchmark::Initialize(&argc, argv);
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double projected = bytes_per_cached_pod<CachedPod>(tightrope::op::decode_cached_pod);
  const double full = bytes_per_cached_pod<Document>(decode_document);
  const json result = {
      {"pods", kPods},
      {"list_bytes", pod_list().size()},
      {"bytes_per_pod_json", static_cast<double>(pod_list().size()) / kPods},
      {"decode_mb_per_s", reporter.mb_per_s["BM_DecodePodListProjected/min_time:2.000"]},
      {"decode_full_mb_per_s", reporter.mb_per_s["BM_DecodePodListFull/min_time:2.000"]},
      {"bytes_per_cached_pod_full", full},
      {"bytes_per_cached_pod_projected", projected},
      {"measured_with",
       "mallinfo2 bytes in use after filling a Store with namespace and owner indexes"}};
  std::cout << result.dump(2) << "\n";
  std::ofstream(out_path) << result.dump(2) << "\n";
  return 0;
}
