#include "gpu/report.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "operator/build/common.hpp"
#include "operator/build/gpus.hpp"

namespace tightrope::gpu {
namespace {

using nlohmann::json;
using op::build::lower;

std::string or_none(const std::string& gres) {
  return gres.empty() ? "(no GPU)" : gres;
}

std::string gib(uint64_t bytes) {
  std::ostringstream out;
  out << (bytes + (1ULL << 29)) / (1ULL << 30) << " GiB";
  return out.str();
}

// Counts in the order each key first appears.
template <typename T>
T& entry(std::vector<T>& list, const std::string& key, auto&& key_of) {
  for (T& t : list) {
    if (key_of(t) == key) {
      return t;
    }
  }
  return list.emplace_back();
}

ModelReport model_report(const std::string& model) {
  ModelReport m;
  m.model = model;
  m.product = gfd_product(model);
  m.tightrope_type = op::build::slurm_gpu_type(m.product);
  m.slurm_type = slurm_detected_type(model);
  m.type_accepted = m.tightrope_type && slurm_accepts_type(*m.tightrope_type, m.slurm_type);
  return m;
}

void count_model(std::vector<ModelReport>& models, const std::string& model) {
  ModelReport& m = entry(models, model, [](const ModelReport& r) { return r.model; });
  if (m.model.empty()) {
    m = model_report(model);
  }
  ++m.count;
}

void append_gres(std::string& gres, const std::string& type, unsigned count) {
  gres += (gres.empty() ? "gpu:" : ",gpu:") + type + ":" + std::to_string(count);
}

bool nonzero_uuid(const std::string& uuid) {
  return uuid.find_first_not_of("0-") != std::string::npos;
}

}  // namespace

std::string slurm_detected_type(std::string_view model) {
  std::string type = lower(model);
  std::replace(type.begin(), type.end(), ' ', '_');
  return type;
}

std::string slurm_mig_type(std::string_view parent_model, std::string_view mig_name) {
  std::string parent = slurm_detected_type(parent_model);
  parent = parent.substr(0, parent.find('-'));
  const std::string mig = slurm_detected_type(mig_name);
  const size_t at = mig.find("mig_");
  return at == std::string::npos ? parent : parent + mig.substr(at + 3);
}

bool slurm_accepts_type(std::string_view configured, std::string_view detected) {
  return !configured.empty() && lower(detected).find(lower(configured)) != std::string::npos;
}

std::string gfd_product(std::string_view model) {
  std::string product(model);
  std::replace(product.begin(), product.end(), ' ', '-');
  return product;
}

Report make_report(const std::optional<NvmlMachine>& nvml, const DriverView& driver) {
  Report r;
  unsigned nvml_gpus = 0;
  if (nvml) {
    r.driver_version = nvml->driver_version;
    std::set<std::string> cliques;
    for (const NvmlGpu& g : nvml->gpus) {
      ++nvml_gpus;
      if (!g.mig_enabled) {
        count_model(r.models, g.name);
      }
      for (const NvmlMig& mig : g.migs) {
        const std::string type = slurm_mig_type(g.name, mig.name);
        MigReport& m = entry(r.migs, type, [](const MigReport& x) { return x.slurm_type; });
        m.slurm_type = type;
        ++m.count;
      }
      if (g.fabric && g.fabric->state == "completed" && g.fabric->registered &&
          nonzero_uuid(g.fabric->cluster_uuid)) {
        cliques.insert(g.fabric->cluster_uuid + "." + std::to_string(g.fabric->clique_id));
      }
    }
    r.cliques.assign(cliques.begin(), cliques.end());
  } else {
    for (const DriverGpu& g : driver.gpus) {
      count_model(r.models, g.model);
    }
  }

  if (nvml) {
    for (const ModelReport& m : r.models) {
      append_gres(r.gres_nvml, m.slurm_type, m.count);
    }
    for (const MigReport& m : r.migs) {
      append_gres(r.gres_nvml, m.slurm_type, m.count);
    }
  }
  std::vector<ModelReport> by_driver;
  for (const DriverGpu& g : driver.gpus) {
    count_model(by_driver, g.model);
  }
  for (const ModelReport& m : by_driver) {
    append_gres(r.gres_nvidia, m.slurm_type, m.count);
  }

  for (const ModelReport& m : r.models) {
    if (!m.type_accepted) {
      r.findings.push_back(
          "A NodeSet pinned to nvidia.com/gpu.product=" + m.product + " is typed " +
          m.tightrope_type.value_or("(none)") + ", which Slurm's " + m.slurm_type +
          " does not contain: slurmd would refuse its GPUs. Set the annotation "
          "tightrope.slurm.net/gpu-type to a part of " +
          m.slurm_type + " (" + m.slurm_type.substr(0, m.slurm_type.find('-')) + ").");
    }
  }
  if (!r.migs.empty()) {
    r.findings.emplace_back(
        "MIG instances are registered only by AutoDetect=nvml, a slurmd image with Slurm's "
        "NVML plugin; AutoDetect=nvidia (Debian's Slurm, Tightrope's images) registers none.");
  }
  if (nvml && driver.present && driver.gpus.size() != nvml_gpus) {
    r.findings.push_back(
        "AutoDetect=nvidia sees " + std::to_string(driver.gpus.size()) +
        " GPUs in /proc/driver/nvidia/gpus, NVML " + std::to_string(nvml_gpus) +
        ": in a container, /proc shows the host's GPUs, not the ones it was given.");
  }
  if (!nvml && !driver.present) {
    r.findings.emplace_back("No NVIDIA driver: Slurm registers no GPU here.");
  }
  for (const DriverGpu& g : driver.gpus) {
    if (!g.device_ok) {
      r.findings.push_back("GPU " + g.bus_id + ": " +
                           (g.device.empty() ? "the driver names no device" : g.device) + " is " +
                           g.device_state +
                           ": slurmd cannot stat it, so it can neither hand the GPU out "
                           "nor confine it (a gres.conf File= naming it stops slurmd after 20 s).");
    }
  }
  return r;
}

std::string render_text(const std::optional<NvmlMachine>& nvml, std::string_view nvml_error,
                        const DriverView& driver, const Report& report) {
  std::ostringstream out;
  if (nvml) {
    out << "NVML " << nvml->nvml_version << ", driver " << nvml->driver_version << ": "
        << nvml->gpus.size() << " GPU" << (nvml->gpus.size() == 1 ? "" : "s") << "\n";
    for (const NvmlGpu& g : nvml->gpus) {
      out << "  " << g.index << "  " << g.name << "  " << g.uuid << "  " << g.bus_id << "  "
          << (g.minor ? "/dev/nvidia" + std::to_string(*g.minor) : "no minor") << "  "
          << gib(g.memory_bytes);
      if (g.nvlinks_active > 0) {
        out << "  nvlinks " << g.nvlinks_active;
      }
      if (g.fabric) {
        out << "  fabric " << g.fabric->cluster_uuid << "." << g.fabric->clique_id << " ("
            << g.fabric->state << ")";
      }
      if (g.mig_enabled) {
        out << "  MIG: " << g.migs.size() << " instance" << (g.migs.size() == 1 ? "" : "s");
      }
      out << "\n";
      for (const NvmlMig& m : g.migs) {
        out << "       " << m.name << "  " << m.uuid;
        if (m.gpu_instance) {
          out << "  gi " << *m.gpu_instance;
        }
        if (m.compute_instance) {
          out << " ci " << *m.compute_instance;
        }
        out << "  " << gib(m.memory_bytes) << "\n";
      }
    }
    for (const std::string& note : nvml->notes) {
      out << "  (" << note << ")\n";
    }
  } else {
    out << "NVML: " << nvml_error << "\n";
  }
  out << "Driver files (/proc/driver/nvidia, what AutoDetect=nvidia reads): ";
  if (!driver.present) {
    out << "none\n";
  } else {
    out << driver.gpus.size() << " GPU" << (driver.gpus.size() == 1 ? "" : "s") << "\n";
    for (const DriverGpu& g : driver.gpus) {
      out << "  " << g.bus_id << "  " << g.model << "  " << (g.device.empty() ? "-" : g.device)
          << " " << g.device_state;
      if (!g.cpus.empty()) {
        out << "  cpus " << g.cpus;
      }
      out << "\n";
    }
  }
  out << "Registration:\n";
  for (const ModelReport& m : report.models) {
    out << "  " << m.count << " x " << m.model << ": nvidia.com/gpu.product=" << m.product
        << " -> Type " << m.tightrope_type.value_or("(none)") << "; Slurm detects " << m.slurm_type
        << ": " << (m.type_accepted ? "accepted" : "REFUSED") << "\n";
  }
  for (const MigReport& m : report.migs) {
    out << "  " << m.count << " x MIG " << m.slurm_type << " (AutoDetect=nvml only)\n";
  }
  for (const std::string& c : report.cliques) {
    out << "  nvidia.com/gpu.clique=" << c << ": topology block " << c << " of topology nvlink\n";
  }
  if (nvml) {
    out << "  AutoDetect=nvml: slurmd registers Gres=" << or_none(report.gres_nvml) << "\n";
  }
  out << "  AutoDetect=nvidia: slurmd registers Gres=" << or_none(report.gres_nvidia) << "\n";
  if (!report.findings.empty()) {
    out << "Findings:\n";
    for (const std::string& f : report.findings) {
      out << "  - " << f << "\n";
    }
  }
  return out.str();
}

json render_json(const std::optional<NvmlMachine>& nvml, std::string_view nvml_error,
                 const DriverView& driver, const Report& report) {
  json j;
  if (nvml) {
    json gpus = json::array();
    for (const NvmlGpu& g : nvml->gpus) {
      json gpu = {{"index", g.index},
                  {"name", g.name},
                  {"uuid", g.uuid},
                  {"busId", g.bus_id},
                  {"memoryBytes", g.memory_bytes},
                  {"migEnabled", g.mig_enabled},
                  {"nvlinksActive", g.nvlinks_active}};
      if (g.minor) {
        gpu["minor"] = *g.minor;
      }
      if (g.fabric) {
        gpu["fabric"] = {{"clusterUuid", g.fabric->cluster_uuid},
                         {"cliqueId", g.fabric->clique_id},
                         {"state", g.fabric->state},
                         {"registered", g.fabric->registered}};
      }
      json migs = json::array();
      for (const NvmlMig& m : g.migs) {
        json mig = {{"name", m.name}, {"uuid", m.uuid}, {"memoryBytes", m.memory_bytes}};
        if (m.gpu_instance) {
          mig["gpuInstance"] = *m.gpu_instance;
        }
        if (m.compute_instance) {
          mig["computeInstance"] = *m.compute_instance;
        }
        migs.push_back(mig);
      }
      gpu["migs"] = migs;
      gpus.push_back(gpu);
    }
    j["nvml"] = {{"version", nvml->nvml_version},
                 {"driverVersion", nvml->driver_version},
                 {"gpus", gpus},
                 {"notes", nvml->notes}};
  } else {
    j["nvml"] = {{"error", nvml_error}};
  }
  json drv = json::array();
  for (const DriverGpu& g : driver.gpus) {
    json gpu = {{"busId", g.bus_id},
                {"model", g.model},
                {"uuid", g.uuid},
                {"device", g.device},
                {"deviceState", g.device_state},
                {"cpus", g.cpus}};
    if (g.minor) {
      gpu["minor"] = *g.minor;
    }
    drv.push_back(gpu);
  }
  j["driver"] = {{"present", driver.present}, {"gpus", drv}};
  json models = json::array();
  for (const ModelReport& m : report.models) {
    models.push_back({{"model", m.model},
                      {"count", m.count},
                      {"product", m.product},
                      {"tightropeType", m.tightrope_type ? json(*m.tightrope_type) : json(nullptr)},
                      {"slurmType", m.slurm_type},
                      {"typeAccepted", m.type_accepted}});
  }
  json migs = json::array();
  for (const MigReport& m : report.migs) {
    migs.push_back({{"slurmType", m.slurm_type}, {"count", m.count}});
  }
  j["registers"] = {{"models", models},
                    {"migs", migs},
                    {"cliques", report.cliques},
                    {"gresNvml", report.gres_nvml},
                    {"gresNvidia", report.gres_nvidia},
                    {"findings", report.findings}};
  return j;
}

}  // namespace tightrope::gpu
