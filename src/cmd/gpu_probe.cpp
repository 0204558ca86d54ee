// tightrope-gpu-probe: what Tightrope and Slurm would register for this machine's GPUs (GRES type
// as Slurm's autodetection names it, count, MIG instances, NVLink fabric clique), next to what
// NVML and NVIDIA's driver files report. Reads only local files and libnvidia-ml; no network.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "gpu/driver.hpp"
#include "gpu/nvml.hpp"
#include "gpu/report.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "tightrope-gpu-probe: what Slurm would register for this machine's GPUs, beside NVML's view"};
  std::string library = "libnvidia-ml.so.1";
  std::string root = "/";
  std::string output = "text";
  app.add_option("--nvml", library, "NVML library to open (a path, or a name the loader finds)")
      ->capture_default_str();
  app.add_option("--root", root, "Directory that holds the driver's proc/, sys/ and dev/ files")
      ->capture_default_str();
  app.add_option("-o,--output", output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto nvml = tightrope::gpu::read_nvml(library);
  std::optional<tightrope::gpu::NvmlMachine> machine;
  std::string nvml_error;
  if (nvml) {
    machine = std::move(nvml).value();
  } else {
    nvml_error = nvml.error();
  }
  const auto driver = tightrope::gpu::read_driver(root);
  const auto report = tightrope::gpu::make_report(machine, driver);
  if (output == "json") {
    std::cout << tightrope::gpu::render_json(machine, nvml_error, driver, report).dump(2) << "\n";
  } else {
    std::cout << tightrope::gpu::render_text(machine, nvml_error, driver, report);
  }
  // A machine without GPUs is an answer, not a failure: the exit status says whether one was read.
  return machine || driver.present ? 0 : 3;
}
