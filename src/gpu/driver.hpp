// What NVIDIA's kernel driver shows of a machine's GPUs without any library: the files Slurm's
// `AutoDetect=nvidia` reads (/proc/driver/nvidia/gpus/<bus id>/information, then the
// /dev/nvidia<minor> it names, and the GPU's CPUs in sysfs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tightrope::gpu {

struct DriverGpu {
  std::string bus_id;             // the directory's name under /proc/driver/nvidia/gpus
  std::string model;              // "Model:"
  std::string uuid;               // "GPU UUID:"
  std::optional<unsigned> minor;  // "Device Minor:"
  std::string device;             // /dev/nvidia<minor>, or "" without a minor
  // What Slurm needs of the device file: a character (or block) device. "char 195:0", or why not
  // ("missing", "not a device").
  std::string device_state;
  bool device_ok = false;
  std::string cpus;  // local_cpulist, as the kernel writes it ("0-15,32-47"); "" when absent
};

struct DriverView {
  bool present = false;         // /proc/driver/nvidia/gpus exists: the driver is loaded
  std::vector<DriverGpu> gpus;  // in bus id order
};

// Reads the driver's files under `root` ("/" on a machine; a directory of stand-in files in tests).
DriverView read_driver(const std::filesystem::path& root);

}  // namespace tightrope::gpu
