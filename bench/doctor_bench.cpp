// The doctor's catalog over a cluster of N workers, as the operator runs it once a check period
// (operator_checks()) and as `kubectl slurm doctor` runs it (every check). Google Benchmark:
//   bench_doctor --benchmark_out=bench/results/bench_doctor.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include "../test/unit/doctor/view_fixture.hpp"
#include "doctor/checks.hpp"
#include "operator/diagnosis.hpp"

namespace {

using tightrope::doctor::testing::Fixture;

Fixture cluster(int64_t workers) {
  Fixture f;
  for (int64_t i = 0; i < workers; ++i) {
    f.worker("w" + std::to_string(i), "k8s-" + std::to_string(i / 10));
  }
  for (int64_t n = 0; n < (workers + 9) / 10; ++n) {
    f.view.kube_nodes.push_back(
        {{"metadata", {{"name", "k8s-" + std::to_string(n)}}}, {"spec", nlohmann::json::object()}});
  }
  return f;
}

void OperatorChecks(benchmark::State& state) {
  const Fixture f = cluster(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(tightrope::doctor::diagnose(f.view, tightrope::op::operator_checks()));
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(OperatorChecks)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

void EveryCheck(benchmark::State& state) {
  const Fixture f = cluster(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(tightrope::doctor::diagnose(f.view, {}));
  }
}
BENCHMARK(EveryCheck)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
