// What NVIDIA's management library (NVML) says of a machine's GPUs, read through libnvidia-ml
// opened at run time: a machine without NVIDIA's driver has no such library, and the programs
// that read it must still start there. Only the calls that decide what Slurm registers are made.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace tightrope::gpu {

// A MIG instance of a GPU in MIG mode.
struct NvmlMig {
  std::string name;  // "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
  std::string uuid;
  std::optional<unsigned> gpu_instance;
  std::optional<unsigned> compute_instance;
  uint64_t memory_bytes = 0;
};

// The GPU's place in a multi-node NVLink fabric (GB200 NVL72 and the like).
struct NvmlFabric {
  std::string cluster_uuid;  // "7b968a6d-...", as GPU Feature Discovery writes it
  unsigned clique_id = 0;
  std::string state;        // not-started, in-progress, completed, or unknown
  bool registered = false;  // the fabric manager registered the GPU (status NVML_SUCCESS)
};

struct NvmlGpu {
  unsigned index = 0;
  std::string name;               // "NVIDIA H100 80GB HBM3"
  std::string uuid;               // "GPU-..."
  std::string bus_id;             // "00000000:17:00.0"
  std::optional<unsigned> minor;  // the N of /dev/nvidiaN
  uint64_t memory_bytes = 0;
  bool mig_enabled = false;
  std::vector<NvmlMig> migs;
  std::optional<NvmlFabric> fabric;  // absent where NVML has no fabric (not an NVSwitch system)
  unsigned nvlinks_active = 0;
};

struct NvmlMachine {
  std::string driver_version;
  std::string nvml_version;
  std::vector<NvmlGpu> gpus;
  std::vector<std::string> notes;  // calls the library lacks or refused, one line each
};

// Opens `library` (a path, or a name dlopen searches for: "libnvidia-ml.so.1"), initialises
// NVML, reads every GPU and shuts NVML down. An error says which step failed and NVML's words.
Result<NvmlMachine, std::string> read_nvml(const std::string& library);

}  // namespace tightrope::gpu
