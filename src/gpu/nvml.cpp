#include "gpu/nvml.hpp"

#include <dlfcn.h>

#include <array>
#include <memory>
#include <string_view>

namespace tightrope::gpu {
namespace {

// NVML's C interface as nvml.h declares it; the layouts below are part of its stable ABI.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kSuccess = 0;
constexpr unsigned kNameSize =
    96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kMaxNvlinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kFeatureEnabled = 1;
constexpr unsigned kMigEnabled = 1;

struct PciInfoV3 {
  std::array<char, 16> bus_id_legacy;
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  std::array<char, 32> bus_id;
};
struct MemoryInfo {
  unsigned long long total, free, used;  // NOLINT(google-runtime-int): NVML's own types
};
struct FabricInfo {
  std::array<unsigned char, 16> cluster_uuid;
  NvmlReturn status;
  unsigned clique_id;
  unsigned char state;
};

class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() { dlclose(handle_); }

  // The symbol as a function of type F, or nullptr where this library has no such call.
  template <typename F>
  F* find(const char* name) const {
    return reinterpret_cast<F*>(dlsym(handle_, name));  // NOLINT: dlsym's contract
  }

 private:
  void* handle_;
};

std::string text(const char* buffer) {
  return buffer;
}

std::string fabric_state(unsigned char state) {
  switch (state) {
    case 1:
      return "not-started";
    case 2:
      return "in-progress";
    case 3:
      return "completed";
    default:
      return "unknown";
  }
}

// GPU Feature Discovery's form of a cluster UUID: lower-case hex, 8-4-4-4-12.
std::string uuid_text(const std::array<unsigned char, 16>& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out += '-';
    }
    constexpr std::string_view kHex = "0123456789abcdef";
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

class Reader {
 public:
  explicit Reader(const Library& lib) : lib_(lib) {
    if (auto* f = lib_.find<const char*(NvmlReturn)>("nvmlErrorString")) {
      error_string_ = f;
    }
  }

  std::string why(NvmlReturn r) const {
    return error_string_ != nullptr ? text(error_string_(r)) : "NVML error " + std::to_string(r);
  }

  // Calls `name` with `args`: true on success; a call the library lacks or refuses is noted.
  template <typename... Args>
  bool call(NvmlMachine& m, const char* name, Args... args) const {
    auto* f = lib_.find<NvmlReturn(Args...)>(name);
    if (f == nullptr) {
      m.notes.push_back(std::string(name) + ": not in this library");
      return false;
    }
    const NvmlReturn r = f(args...);
    if (r != kSuccess) {
      m.notes.push_back(std::string(name) + ": " + why(r));
    }
    return r == kSuccess;
  }

  // As call, but a refusal is expected (a GPU without MIG or NVLink): nothing is noted.
  template <typename... Args>
  bool ask(const char* name, Args... args) const {
    auto* f = lib_.find<NvmlReturn(Args...)>(name);
    return f != nullptr && f(args...) == kSuccess;
  }

 private:
  const Library& lib_;
  const char* (*error_string_)(NvmlReturn) = nullptr;
};

// A device's name or UUID, which NVML writes into a buffer it is given; "" when it refuses.
std::string text_of(const Reader& r, NvmlMachine& m, const char* call, NvmlDevice device) {
  std::array<char, kNameSize> buffer{};
  return r.call(m, call, device, buffer.data(), kNameSize) ? text(buffer.data()) : "";
}

std::vector<NvmlMig> read_migs(const Reader& r, NvmlMachine& m, NvmlDevice gpu) {
  std::vector<NvmlMig> migs;
  unsigned slots = 0;
  if (!r.call(m, "nvmlDeviceGetMaxMigDeviceCount", gpu, &slots)) {
    return migs;
  }
  for (unsigned i = 0; i < slots; ++i) {
    NvmlDevice mig = nullptr;
    if (!r.ask("nvmlDeviceGetMigDeviceHandleByIndex", gpu, i, &mig)) {
      continue;  // an empty slot
    }
    NvmlMig out;
    out.name = text_of(r, m, "nvmlDeviceGetName", mig);
    out.uuid = text_of(r, m, "nvmlDeviceGetUUID", mig);
    unsigned id = 0;
    if (r.ask("nvmlDeviceGetGpuInstanceId", mig, &id)) {
      out.gpu_instance = id;
    }
    if (r.ask("nvmlDeviceGetComputeInstanceId", mig, &id)) {
      out.compute_instance = id;
    }
    MemoryInfo memory{};
    if (r.ask("nvmlDeviceGetMemoryInfo", mig, &memory)) {
      out.memory_bytes = memory.total;
    }
    migs.push_back(std::move(out));
  }
  return migs;
}

NvmlGpu read_gpu(const Reader& r, NvmlMachine& m, unsigned index, NvmlDevice gpu) {
  NvmlGpu out;
  out.index = index;
  out.name = text_of(r, m, "nvmlDeviceGetName", gpu);
  out.uuid = text_of(r, m, "nvmlDeviceGetUUID", gpu);
  PciInfoV3 pci{};
  if (r.call(m, "nvmlDeviceGetPciInfo_v3", gpu, &pci)) {
    out.bus_id = text(pci.bus_id.data());
  }
  unsigned minor = 0;
  if (r.call(m, "nvmlDeviceGetMinorNumber", gpu, &minor)) {
    out.minor = minor;
  }
  MemoryInfo memory{};
  if (r.call(m, "nvmlDeviceGetMemoryInfo", gpu, &memory)) {
    out.memory_bytes = memory.total;
  }
  unsigned current = 0;
  unsigned pending = 0;
  if (r.ask("nvmlDeviceGetMigMode", gpu, &current, &pending)) {
    out.mig_enabled = current == kMigEnabled;
  }
  if (out.mig_enabled) {
    out.migs = read_migs(r, m, gpu);
  }
  FabricInfo fabric{};
  if (r.ask("nvmlDeviceGetGpuFabricInfo", gpu, &fabric) && fabric.state != 0) {
    out.fabric = NvmlFabric{uuid_text(fabric.cluster_uuid), fabric.clique_id,
                            fabric_state(fabric.state), fabric.status == kSuccess};
  }
  for (unsigned link = 0; link < kMaxNvlinks; ++link) {
    int state = 0;
    if (r.ask("nvmlDeviceGetNvLinkState", gpu, link, &state) && state == kFeatureEnabled) {
      ++out.nvlinks_active;
    }
  }
  return out;
}

}  // namespace

Result<NvmlMachine, std::string> read_nvml(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return fail("cannot open " + library + ": " + (e != nullptr ? e : "unknown error"));
  }
  const Library lib(handle);
  const Reader r(lib);
  auto* init = lib.find<NvmlReturn()>("nvmlInit_v2");
  if (init == nullptr) {
    return fail(library + " has no nvmlInit_v2: not NVIDIA's management library");
  }
  if (const NvmlReturn e = init(); e != kSuccess) {
    return fail("nvmlInit_v2: " + r.why(e));
  }

  NvmlMachine m;
  std::array<char, 80> version{};
  if (r.call(m, "nvmlSystemGetDriverVersion", version.data(),
             static_cast<unsigned>(version.size()))) {
    m.driver_version = text(version.data());
  }
  version.fill(0);
  if (r.call(m, "nvmlSystemGetNVMLVersion", version.data(),
             static_cast<unsigned>(version.size()))) {
    m.nvml_version = text(version.data());
  }
  unsigned count = 0;
  if (r.call(m, "nvmlDeviceGetCount_v2", &count)) {
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice gpu = nullptr;
      if (r.call(m, "nvmlDeviceGetHandleByIndex_v2", i, &gpu)) {
        m.gpus.push_back(read_gpu(r, m, i, gpu));
      }
    }
  }
  if (auto* shutdown = lib.find<NvmlReturn()>("nvmlShutdown")) {
    shutdown();
  }
  return m;
}

}  // namespace tightrope::gpu
