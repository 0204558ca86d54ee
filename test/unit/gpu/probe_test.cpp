#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpu/driver.hpp"
#include "gpu/nvml.hpp"
#include "gpu/report.hpp"

namespace tightrope::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The stand-in libnvidia-ml (fake_nvml.cpp) is built beside this test.
std::string fake_nvml() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / "libnvidia-ml-fake.so").string();
}

NvmlMachine machine() {
  auto m = read_nvml(fake_nvml());
  EXPECT_TRUE(m) << m.error();
  return m ? *m : NvmlMachine{};
}

// A directory laid out as the driver lays out its files; device files are links to /dev/null (a
// character device, as the driver's are) so that no test needs to be root.
class DriverFiles {
 public:
  DriverFiles() : root_(fs::temp_directory_path() / ("gpu-probe-" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "dev");
  }
  DriverFiles(const DriverFiles&) = delete;
  DriverFiles& operator=(const DriverFiles&) = delete;
  ~DriverFiles() { fs::remove_all(root_); }

  void gpu(const std::string& bus_id, const std::string& model, unsigned minor,
           bool device = true) {
    const fs::path dir = root_ / "proc/driver/nvidia/gpus" / bus_id;
    fs::create_directories(dir);
    std::ofstream(dir / "information")
        << "Model: \t\t " << model << "\nIRQ:   \t\t 42\nGPU UUID: \t GPU-" << minor
        << "\nBus Type: \t PCIe\nDevice Minor: \t " << minor << "\nGPU Excluded:\t No\n";
    if (device) {
      fs::create_symlink("/dev/null", root_ / "dev" / ("nvidia" + std::to_string(minor)));
    }
  }
  void cpus(const std::string& bus_id, const std::string& list) {
    const fs::path dir = root_ / "sys/bus/pci/drivers/nvidia" / bus_id;
    fs::create_directories(dir);
    std::ofstream(dir / "local_cpulist") << list << "\n";
  }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

TEST(SlurmNames, AreTheModelLowerCasedWithUnderscoresForSpaces) {
  EXPECT_EQ(slurm_detected_type("NVIDIA H100 80GB HBM3"), "nvidia_h100_80gb_hbm3");
  EXPECT_EQ(slurm_detected_type("NVIDIA A100-SXM4-80GB"), "nvidia_a100-sxm4-80gb");
  EXPECT_EQ(slurm_mig_type("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB MIG 1g.5gb"),
            "nvidia_a100_1g.5gb");
  EXPECT_EQ(slurm_mig_type("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
            "nvidia_h100_80gb_hbm3_1g.10gb");
  EXPECT_EQ(gfd_product("NVIDIA H100 80GB HBM3"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_TRUE(slurm_accepts_type("NVIDIA_A100", "nvidia_a100-sxm4-80gb"));
  EXPECT_FALSE(slurm_accepts_type("nvidia_a100_sxm4_80gb", "nvidia_a100-sxm4-80gb"));
  EXPECT_FALSE(slurm_accepts_type("", "nvidia_h100"));
}

TEST(Nvml, ReadsEveryGpuItsMigInstancesAndItsFabric) {
  const NvmlMachine m = machine();
  EXPECT_EQ(m.driver_version, "580.95.05");
  ASSERT_EQ(m.gpus.size(), 3U);
  const NvmlGpu& h100 = m.gpus[0];
  EXPECT_EQ(h100.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.bus_id, "00000000:17:00.0");
  EXPECT_EQ(h100.minor, 0U);
  EXPECT_EQ(h100.nvlinks_active, 18U);
  ASSERT_TRUE(h100.fabric);
  EXPECT_EQ(h100.fabric->cluster_uuid, "7b7c7d7e-7f80-8182-8384-85868788898a");
  EXPECT_EQ(h100.fabric->clique_id, 7U);
  EXPECT_EQ(h100.fabric->state, "completed");
  const NvmlGpu& a100 = m.gpus[2];
  EXPECT_EQ(a100.minor, 4U);
  EXPECT_FALSE(a100.fabric);
  EXPECT_TRUE(a100.mig_enabled);
  ASSERT_EQ(a100.migs.size(), 2U);
  EXPECT_EQ(a100.migs[1].name, "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
  EXPECT_EQ(a100.migs[1].gpu_instance, 9U);
  EXPECT_EQ(a100.migs[1].compute_instance, 0U);
  EXPECT_TRUE(m.notes.empty()) << m.notes.front();
}

TEST(Nvml, SaysWhyItCannotBeRead) {
  auto missing = read_nvml("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("cannot open /nonexistent/libnvidia-ml.so.1"));
  setenv("FAKE_NVML_INIT", "9", 1);
  auto no_driver = read_nvml(fake_nvml());
  unsetenv("FAKE_NVML_INIT");
  ASSERT_FALSE(no_driver);
  EXPECT_EQ(no_driver.error(), "nvmlInit_v2: Driver Not Loaded");
}

TEST(Driver, ReadsWhatAutoDetectNvidiaReads) {
  DriverFiles files;
  files.gpu("0000:2a:00.0", "NVIDIA H100 80GB HBM3", 1);
  files.gpu("0000:17:00.0", "NVIDIA H100 80GB HBM3", 0);
  files.gpu("0000:3b:00.0", "NVIDIA A100-SXM4-40GB", 4, /*device=*/false);
  files.cpus("0000:17:00.0", "0-15,32-47");
  const DriverView v = read_driver(files.root());
  ASSERT_TRUE(v.present);
  ASSERT_EQ(v.gpus.size(), 3U);
  EXPECT_EQ(v.gpus[0].bus_id, "0000:17:00.0");
  EXPECT_EQ(v.gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(v.gpus[0].uuid, "GPU-0");
  EXPECT_EQ(v.gpus[0].device, "/dev/nvidia0");
  EXPECT_TRUE(v.gpus[0].device_ok);
  EXPECT_EQ(v.gpus[0].device_state, "char 1:3");
  EXPECT_EQ(v.gpus[0].cpus, "0-15,32-47");
  EXPECT_EQ(v.gpus[2].device_state, "missing");
  EXPECT_FALSE(v.gpus[2].device_ok);
  EXPECT_FALSE(read_driver("/nonexistent").present);
}

TEST(Report, NamesWhatSlurmRegistersFromNvml) {
  DriverFiles files;
  files.gpu("0000:17:00.0", "NVIDIA H100 80GB HBM3", 0);
  files.gpu("0000:2a:00.0", "NVIDIA H100 80GB HBM3", 1);
  const Report r = make_report(machine(), read_driver(files.root()));
  ASSERT_EQ(r.models.size(), 1U);  // the A100 is in MIG mode: only its instances count
  EXPECT_EQ(r.models[0].count, 2U);
  EXPECT_EQ(r.models[0].product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(r.models[0].tightrope_type, "nvidia_h100_80gb_hbm3");
  EXPECT_TRUE(r.models[0].type_accepted);
  EXPECT_EQ(r.gres_nvml,
            "gpu:nvidia_h100_80gb_hbm3:2,gpu:nvidia_a100_3g.20gb:1,gpu:nvidia_a100_1g.5gb:1");
  EXPECT_EQ(r.gres_nvidia, "gpu:nvidia_h100_80gb_hbm3:2");
  EXPECT_THAT(r.cliques, ElementsAre("7b7c7d7e-7f80-8182-8384-85868788898a.7"));
  ASSERT_EQ(r.findings.size(), 2U);
  EXPECT_THAT(r.findings[0], HasSubstr("only by AutoDetect=nvml"));
  EXPECT_THAT(r.findings[1],
              HasSubstr("AutoDetect=nvidia sees 2 GPUs in /proc/driver/nvidia/gpus, NVML 3"));
  const std::string text = render_text(machine(), "", read_driver(files.root()), r);
  EXPECT_THAT(
      text,
      HasSubstr("2 x NVIDIA H100 80GB HBM3: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 -> Type "
                "nvidia_h100_80gb_hbm3; Slurm detects nvidia_h100_80gb_hbm3: accepted"));
  EXPECT_THAT(text,
              HasSubstr("AutoDetect=nvml: slurmd registers Gres=gpu:nvidia_h100_80gb_hbm3:2,"));
  EXPECT_THAT(text,
              HasSubstr("AutoDetect=nvidia: slurmd registers Gres=gpu:nvidia_h100_80gb_hbm3:2\n"));
  const auto json = render_json(machine(), "", read_driver(files.root()), r);
  EXPECT_EQ(json["registers"]["gresNvml"], r.gres_nvml);
  EXPECT_EQ(json["nvml"]["gpus"][2]["migs"][0]["gpuInstance"], 1);
}

TEST(Report, FromTheDriverAloneFlagsATypeSlurmWouldRefuseAndAMissingDevice) {
  DriverFiles files;
  files.gpu("0000:3b:00.0", "NVIDIA A100-SXM4-80GB", 0);
  files.gpu("0000:4c:00.0", "NVIDIA A100-SXM4-80GB", 1, /*device=*/false);
  const Report r = make_report(std::nullopt, read_driver(files.root()));
  ASSERT_EQ(r.models.size(), 1U);
  EXPECT_EQ(r.models[0].tightrope_type, "nvidia_a100_sxm4_80gb");
  EXPECT_EQ(r.models[0].slurm_type, "nvidia_a100-sxm4-80gb");
  EXPECT_FALSE(r.models[0].type_accepted);
  EXPECT_EQ(r.gres_nvml, "");
  EXPECT_EQ(r.gres_nvidia, "gpu:nvidia_a100-sxm4-80gb:2");
  ASSERT_EQ(r.findings.size(), 2U);
  EXPECT_THAT(
      r.findings[0],
      HasSubstr("tightrope.slurm.net/gpu-type to a part of nvidia_a100-sxm4-80gb (nvidia_a100)"));
  EXPECT_THAT(r.findings[1], HasSubstr("/dev/nvidia1 is missing: slurmd cannot stat it"));
  EXPECT_THAT(make_report(std::nullopt, read_driver("/nonexistent")).findings,
              ElementsAre("No NVIDIA driver: Slurm registers no GPU here."));
}

}  // namespace
}  // namespace tightrope::gpu
