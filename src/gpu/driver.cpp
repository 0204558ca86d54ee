#include "gpu/driver.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <system_error>

namespace tightrope::gpu {
namespace {

namespace fs = std::filesystem;

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The value after "<key>:" in the driver's information file, trimmed.
std::optional<std::string> field(const std::string& line, std::string_view key) {
  if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') {
    return std::nullopt;
  }
  return std::string(trim(std::string_view(line).substr(key.size() + 1)));
}

void read_information(const fs::path& file, DriverGpu& gpu) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (auto v = field(line, "Model")) {
      gpu.model = *v;
    }
    if (auto v = field(line, "GPU UUID")) {
      gpu.uuid = *v;
    }
    if (const auto v = field(line, "Device Minor")) {
      const std::string_view digits = *v;
      unsigned n = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec == std::errc{} && end == digits.data() + digits.size()) {
        gpu.minor = n;
      }
    }
  }
}

// Slurm takes a device's major:minor from stat(2) and skips a file that is not a device.
void check_device(const fs::path& root, DriverGpu& gpu) {
  if (!gpu.minor) {
    gpu.device_state = "no Device Minor";
    return;
  }
  gpu.device = "/dev/nvidia" + std::to_string(*gpu.minor);
  struct stat st {};
  if (stat((root / gpu.device.substr(1)).c_str(), &st) != 0) {
    gpu.device_state = "missing";
    return;
  }
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
    gpu.device_state = "not a device";
    return;
  }
  gpu.device_ok = true;
  gpu.device_state = std::string(S_ISCHR(st.st_mode) ? "char " : "block ") +
                     std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
}

std::string read_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return std::string(trim(line));
}

}  // namespace

DriverView read_driver(const fs::path& root) {
  DriverView view;
  const fs::path gpus = root / "proc/driver/nvidia/gpus";
  std::error_code ec;
  if (!fs::is_directory(gpus, ec)) {
    return view;
  }
  view.present = true;
  for (const auto& entry : fs::directory_iterator(gpus, ec)) {
    // Slurm takes an entry of five or more characters for a GPU's bus id.
    const std::string name = entry.path().filename().string();
    if (name.size() < 5) {
      continue;
    }
    DriverGpu gpu;
    gpu.bus_id = name;
    read_information(entry.path() / "information", gpu);
    check_device(root, gpu);
    gpu.cpus = read_line(root / "sys/bus/pci/drivers/nvidia" / name / "local_cpulist");
    view.gpus.push_back(std::move(gpu));
  }
  std::sort(view.gpus.begin(), view.gpus.end(),
            [](const DriverGpu& a, const DriverGpu& b) { return a.bus_id < b.bus_id; });
  return view;
}

}  // namespace tightrope::gpu
