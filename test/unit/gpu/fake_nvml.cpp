// A stand-in for libnvidia-ml: the NVML calls gpu/nvml.cpp makes, answering for a fixed machine
// of three GPUs: two H100s of one NVLink fabric clique, and an A100 in MIG mode with two
// instances. FAKE_NVML_INIT=<code> makes nvmlInit_v2 fail with that code.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Gpu {
  const char* name;
  const char* uuid;
  const char* bus_id;
  unsigned minor;
  unsigned long long memory;  // NOLINT(google-runtime-int)
  bool mig;
  unsigned clique;  // 0: no fabric
  unsigned nvlinks;
};

struct Mig {
  unsigned parent;
  const char* name;
  const char* uuid;
  unsigned gi, ci;
};

constexpr std::array<Gpu, 3> kGpus{{
    {"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", "00000000:17:00.0", 0,
     85520809984ULL, false, 7, 18},
    {"NVIDIA H100 80GB HBM3", "GPU-66666666-7777-8888-9999-000000000000", "00000000:2A:00.0", 1,
     85520809984ULL, false, 7, 18},
    {"NVIDIA A100-SXM4-40GB", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "00000000:3B:00.0", 4,
     42949672960ULL, true, 0, 0},
}};
constexpr std::array<Mig, 2> kMigs{{
    {2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "MIG-01010101-0000-0000-0000-000000000001", 1, 0},
    {2, "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "MIG-01010101-0000-0000-0000-000000000002", 9, 0},
}};

// Handles are addresses in these arrays: a GPU's, or a MIG instance's.
const void* gpu_handle(unsigned i) {
  return &kGpus.at(i);
}
const void* mig_handle(unsigned i) {
  return &kMigs.at(i);
}
const Gpu* as_gpu(const void* h) {
  for (const Gpu& g : kGpus) {
    if (h == &g) {
      return &g;
    }
  }
  return nullptr;
}
const Mig* as_mig(const void* h) {
  for (const Mig& m : kMigs) {
    if (h == &m) {
      return &m;
    }
  }
  return nullptr;
}

int copy(char* out, unsigned size, const char* value) {
  if (std::strlen(value) + 1 > size) {
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  std::strcpy(out, value);  // NOLINT: bounded above
  return 0;
}

constexpr int kInvalid = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* code = std::getenv("FAKE_NVML_INIT");
  return code != nullptr ? std::atoi(code) : 0;  // NOLINT(cert-err34-c)
}
int nvmlShutdown() {
  return 0;
}
const char* nvmlErrorString(int r) {
  switch (r) {
    case 9:
      return "Driver Not Loaded";
    case kNotSupported:
      return "Not Supported";
    default:
      return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* out, unsigned size) {
  return copy(out, size, "580.95.05");
}
int nvmlSystemGetNVMLVersion(char* out, unsigned size) {
  return copy(out, size, "13.580.95.05");
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = kGpus.size();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, const void** h) {
  if (i >= kGpus.size()) {
    return kInvalid;
  }
  *h = gpu_handle(i);
  return 0;
}
int nvmlDeviceGetName(const void* h, char* out, unsigned size) {
  if (const Gpu* g = as_gpu(h)) {
    return copy(out, size, g->name);
  }
  if (const Mig* m = as_mig(h)) {
    return copy(out, size, m->name);
  }
  return kInvalid;
}
int nvmlDeviceGetUUID(const void* h, char* out, unsigned size) {
  if (const Gpu* g = as_gpu(h)) {
    return copy(out, size, g->uuid);
  }
  if (const Mig* m = as_mig(h)) {
    return copy(out, size, m->uuid);
  }
  return kInvalid;
}
struct PciInfo {
  std::array<char, 16> legacy;
  unsigned domain, bus, device, id, subsystem;
  std::array<char, 32> bus_id;
};
int nvmlDeviceGetPciInfo_v3(const void* h, PciInfo* pci) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr) {
    return kInvalid;
  }
  return copy(pci->bus_id.data(), pci->bus_id.size(), g->bus_id);
}
int nvmlDeviceGetMinorNumber(const void* h, unsigned* minor) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr) {
    return kInvalid;
  }
  *minor = g->minor;
  return 0;
}
struct Memory {
  unsigned long long total, free, used;  // NOLINT(google-runtime-int)
};
int nvmlDeviceGetMemoryInfo(const void* h, Memory* m) {
  if (const Gpu* g = as_gpu(h)) {
    *m = {g->memory, g->memory, 0};
    return 0;
  }
  if (const Mig* mig = as_mig(h)) {
    const unsigned long long total =
        std::strstr(mig->name, "1g.5gb") != nullptr ? 4ULL << 30 : 19ULL << 30;  // NOLINT
    *m = {total, total, 0};
    return 0;
  }
  return kInvalid;
}
int nvmlDeviceGetMigMode(const void* h, unsigned* current, unsigned* pending) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr || !g->mig) {
    return kNotSupported;
  }
  *current = *pending = 1;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(const void* h, unsigned* n) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr || !g->mig) {
    return kNotSupported;
  }
  *n = 7;
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(const void* h, unsigned i, const void** mig) {
  if (as_gpu(h) == nullptr) {
    return kInvalid;
  }
  unsigned seen = 0;
  for (unsigned k = 0; k < kMigs.size(); ++k) {
    if (&kGpus.at(kMigs.at(k).parent) != h) {
      continue;
    }
    if (seen++ == i) {
      *mig = mig_handle(k);
      return 0;
    }
  }
  return kNotFound;
}
int nvmlDeviceGetGpuInstanceId(const void* h, unsigned* id) {
  const Mig* m = as_mig(h);
  if (m == nullptr) {
    return kNotSupported;
  }
  *id = m->gi;
  return 0;
}
int nvmlDeviceGetComputeInstanceId(const void* h, unsigned* id) {
  const Mig* m = as_mig(h);
  if (m == nullptr) {
    return kNotSupported;
  }
  *id = m->ci;
  return 0;
}
struct Fabric {
  std::array<unsigned char, 16> cluster;
  int status;
  unsigned clique;
  unsigned char state;
};
int nvmlDeviceGetGpuFabricInfo(const void* h, Fabric* f) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr || g->clique == 0) {
    return kNotSupported;
  }
  for (unsigned char i = 0; i < f->cluster.size(); ++i) {
    f->cluster.at(i) = static_cast<unsigned char>(0x7b + i);
  }
  f->status = 0;
  f->clique = g->clique;
  f->state = 3;  // completed
  return 0;
}
int nvmlDeviceGetNvLinkState(const void* h, unsigned link, int* active) {
  const Gpu* g = as_gpu(h);
  if (g == nullptr || g->nvlinks == 0) {
    return kNotSupported;
  }
  *active = link < g->nvlinks ? 1 : 0;
  return 0;
}

}  // extern "C"
