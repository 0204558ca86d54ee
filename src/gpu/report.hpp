// What Tightrope and Slurm would register for a machine's GPUs, next to what NVML and the driver
// report: the answer of `tightrope-gpu-probe`. Pure: the readers of nvml.hpp and driver.hpp feed
// it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/driver.hpp"
#include "gpu/nvml.hpp"

namespace tightrope::gpu {

// Slurm's names (src/plugins/gpu/common: lower case, ' ' made '_', nothing dropped).
std::string slurm_detected_type(std::string_view model);
// A MIG instance's type as AutoDetect=nvml names it: the parent's type up to its first '-', then
// the profile ("NVIDIA A100-SXM4-40GB" + "... MIG 1g.5gb" -> "nvidia_a100_1g.5gb").
std::string slurm_mig_type(std::string_view parent_model, std::string_view mig_name);
// Slurm accepts a configured Type= that is a case-insensitive substring of the detected one.
bool slurm_accepts_type(std::string_view configured, std::string_view detected);
// GPU Feature Discovery's nvidia.com/gpu.product: the name with ' ' made '-'.
std::string gfd_product(std::string_view model);

// One model of GPU on the machine (whole GPUs, not in MIG mode).
struct ModelReport {
  std::string model;
  unsigned count = 0;
  std::string product;                        // nvidia.com/gpu.product
  std::optional<std::string> tightrope_type;  // what the operator writes for a NodeSet pinned to it
  std::string slurm_type;                     // what AutoDetect names it
  bool type_accepted = false;                 // Slurm takes the operator's type for its own
};

struct MigReport {
  std::string slurm_type;  // "nvidia_a100_1g.5gb"
  unsigned count = 0;
};

struct Report {
  std::string driver_version;  // NVML's, else empty
  std::vector<ModelReport> models;
  std::vector<MigReport> migs;
  std::vector<std::string> cliques;  // nvidia.com/gpu.clique values: topology blocks
  // slurmd's Gres= for this machine ("gpu:nvidia_h100_80gb_hbm3:2") with each autodetection:
  // NVML's (Slurm's NVML plugin: MIG instances apart), and the driver files' (no library: a GPU
  // in MIG mode counts whole); "" where it finds nothing.
  std::string gres_nvml;
  std::string gres_nvidia;
  std::vector<std::string> findings;  // what would make Slurm register a count other than NVML's
};

// `nvml` is nullopt where NVML could not be read (no driver, no library).
Report make_report(const std::optional<NvmlMachine>& nvml, const DriverView& driver);

// The probe's output: human-readable, and as one JSON document.
std::string render_text(const std::optional<NvmlMachine>& nvml, std::string_view nvml_error,
                        const DriverView& driver, const Report& report);
nlohmann::json render_json(const std::optional<NvmlMachine>& nvml, std::string_view nvml_error,
                           const DriverView& driver, const Report& report);

}  // namespace tightrope::gpu
