#include "health/checks.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "slurm/gres.hpp"

namespace tightrope::health {
namespace {

using nlohmann::json;

bool wanted(const Config& config, std::string_view check) {
  return std::find(config.checks.begin(), config.checks.end(), check) != config.checks.end();
}

std::string first_line(const std::string& text) {
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) {
    return "";
  }
  std::string line = text.substr(start, text.find('\n', start) - start);
  constexpr size_t kMaxLine = 200;  // a reason, not a log
  if (line.size() > kMaxLine) {
    line = line.substr(0, kMaxLine) + "...";
  }
  return line;
}

json finding_json(const Finding& f) {
  return {{"check", f.check}, {"message", f.message}};
}

}  // namespace

Result<Config, std::string> parse_config(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return fail(std::string("not a JSON object"));
  }
  Config config;
  const auto integer = [&](const char* key, int64_t* out) -> bool {
    const auto it = doc.find(key);
    if (it == doc.end()) {
      return true;
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return false;
    }
    *out = it->get<int64_t>();
    return true;
  };
  const auto strings = [&](const char* key, std::vector<std::string>* out) -> bool {
    const auto it = doc.find(key);
    if (it == doc.end()) {
      return true;
    }
    if (!it->is_array()) {
      return false;
    }
    for (const auto& item : *it) {
      if (!item.is_string()) {
        return false;
      }
      out->push_back(item.get<std::string>());
    }
    return true;
  };
  if (!integer("intervalSeconds", &config.interval_seconds)) {
    return fail(std::string("intervalSeconds: must be a positive integer"));
  }
  if (!integer("timeoutSeconds", &config.timeout_seconds)) {
    return fail(std::string("timeoutSeconds: must be a positive integer"));
  }
  if (!integer("deadlineSeconds", &config.deadline_seconds)) {
    return fail(std::string("deadlineSeconds: must be a positive integer"));
  }
  if (!strings("checks", &config.checks)) {
    return fail(std::string("checks: must be a list of strings"));
  }
  if (const auto source = doc.find("source"); source != doc.end()) {
    if (!source->is_string()) {
      return fail(std::string("source: must be a string"));
    }
    config.source = source->get<std::string>();
  }
  if (!strings("mounts", &config.mounts)) {
    return fail(std::string("mounts: must be a list of strings"));
  }
  config.dcgm_host = doc.value("dcgmHost", "");
  if (const auto active = doc.find("active"); active != doc.end()) {
    if (!active->is_object()) {
      return fail(std::string("active: must be an object"));
    }
    ActiveConfig& a = config.active.emplace();
    const auto count = [&](const char* key, int64_t* out) {
      const auto it = active->find(key);
      if (it != active->end() && it->is_number_integer() && it->get<int64_t>() >= 0) {
        *out = it->get<int64_t>();
      }
    };
    if (const auto checks = active->find("checks"); checks != active->end() && checks->is_array()) {
      for (const auto& item : *checks) {
        if (item.is_string()) {
          a.checks.push_back(item.get<std::string>());
        }
      }
    }
    count("timeoutSeconds", &a.timeout_seconds);
    count("minCpuGflops", &a.min_cpu_gflops);
    count("minMemoryBandwidthMBps", &a.min_memory_bandwidth_mbps);
    count("minNcclBusBandwidthGBps", &a.min_nccl_bus_bandwidth_gbps);
    a.nccl_tests = active->value("ncclTests", "");
  }
  return config;
}

Registered parse_node_json(std::string_view text) {
  Registered out;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array() ||
      doc["nodes"].empty() || !doc["nodes"][0].is_object()) {
    return out;
  }
  const json& n = doc["nodes"][0];
  const auto integer = [&](const char* key) -> int64_t {
    const auto it = n.find(key);
    return it != n.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  const auto text_of = [&](const char* key) -> std::string {
    const auto it = n.find(key);
    return it != n.end() && it->is_string() ? it->get<std::string>() : "";
  };
  out.known = !text_of("name").empty();
  out.cpus = integer("cpus");
  out.real_memory_mib = integer("real_memory");
  out.gpus = slurm::gpu_count(text_of("gres"));
  out.extra = text_of("extra");
  return out;
}

std::vector<Finding> judge(const Config& config, const Registered& registered,
                           const Readings& readings) {
  std::vector<Finding> out;
  if (wanted(config, "mounts")) {
    for (const auto& m : readings.mounts) {
      if (!m.mounted) {
        out.push_back({"mounts", m.path + " is not mounted"});
      } else if (!m.answered) {
        out.push_back({"mounts", m.path + " does not answer statfs within " +
                                     std::to_string(config.timeout_seconds) + " s"});
      } else if (!m.error.empty()) {
        out.push_back({"mounts", m.path + ": " + m.error});
      }
    }
  }
  // Slurm registers MemTotal in MiB when slurmd starts; a kernel that later shows 1% less has
  // lost memory (a DIMM taken offline), not rounding.
  if (wanted(config, "memory") && registered.real_memory_mib > 0 &&
      readings.memory_mib * 100 < registered.real_memory_mib * 99) {
    out.push_back({"memory", std::to_string(readings.memory_mib) +
                                 " MiB of memory, Slurm registered " +
                                 std::to_string(registered.real_memory_mib) + " MiB"});
  }
  if (wanted(config, "cpus") && registered.cpus > 0 && readings.cpus < registered.cpus) {
    out.push_back({"cpus", std::to_string(readings.cpus) + " CPUs usable, Slurm registered " +
                               std::to_string(registered.cpus)});
  }
  if (wanted(config, "gpus") && registered.gpus > 0 &&
      readings.gpus.value_or(0) < registered.gpus) {
    out.push_back({"gpus", std::to_string(readings.gpus.value_or(0)) +
                               " GPUs present, Slurm registered " +
                               std::to_string(registered.gpus)});
  }
  // Only DCGM's Failure drains: a Warning (a GPU running hot, a correctable error count) is
  // DCGM's advice, and a DCGM that cannot be asked says nothing of the machine.
  if (wanted(config, "dcgm") && readings.dcgm && readings.dcgm->health &&
      readings.dcgm->health->overall == "Failure") {
    std::string what;
    for (const auto& i : readings.dcgm->health->incidents) {
      if (i.health == "Failure") {
        what += (what.empty() ? "" : "; ") + i.entity + " " + i.system +
                (i.message.empty() ? "" : ": " + i.message);
      }
    }
    out.push_back({"dcgm", first_line(what.empty() ? "DCGM reports Failure" : what)});
  }
  for (const auto& s : readings.scripts) {
    const std::string line = first_line(s.output);
    if (s.timed_out) {
      out.push_back({"script:" + s.name,
                     "did not finish within " + std::to_string(config.timeout_seconds) + " s"});
    } else if (s.exit_code != 0) {
      out.push_back(
          {"script:" + s.name, line.empty() ? "exit code " + std::to_string(s.exit_code) : line});
    }
  }
  return out;
}

std::optional<DcgmHealth> parse_dcgm_health(std::string_view text) {
  // dcgmi's JSON output: {"header": [...], "body": {"Overall Health": {"value": ..},
  // "<entity group>": {"children": {"<id>": {"value": .., "children": {"Errors": {"children":
  // {"<system>": {"value": .., "overflow": [<message parts>]}}}}}}}}}
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json body = doc.is_object() ? doc.value("body", json()) : json();
  if (!body.is_object() || !body.contains("Overall Health")) {
    return std::nullopt;
  }
  DcgmHealth out;
  out.overall = body["Overall Health"].value("value", "");
  for (const auto& [group, entities] : body.items()) {
    if (group == "Overall Health" || !entities.is_object()) {
      continue;
    }
    const json children = entities.value("children", json::object());
    for (const auto& [id, entity] : children.items()) {
      const json systems = entity.value("/children/Errors/children"_json_pointer, json::object());
      for (const auto& [system, verdict] : systems.items()) {
        std::string message;
        for (const auto& part : verdict.value("overflow", json::array())) {
          if (part.is_string()) {
            message += (message.empty() ? "" : " ") + part.get<std::string>();
          }
        }
        std::string named = group;
        named.append(" ").append(id);
        out.incidents.push_back({named, system, verdict.value("value", ""), message});
      }
    }
  }
  return out;
}

Report report_of(const std::vector<Finding>& findings, int64_t now, const std::string& source) {
  Report out;
  out.ok = findings.empty();
  out.at = now;
  out.failed = findings;
  out.source = source;
  return out;
}

std::optional<Report> read_report(std::string_view extra, std::string_view key) {
  const json doc = json::parse(extra, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_object()) {
    return std::nullopt;
  }
  const json& r = *it;
  Report out;
  out.ok = r.value("ok", false);
  out.at = r.contains("at") && r["at"].is_number_integer() ? r["at"].get<int64_t>() : 0;
  out.source = r.value("source", "");
  const auto findings = [&](const char* field, std::vector<Finding>* into) {
    if (const auto list = r.find(field); list != r.end() && list->is_array()) {
      for (const auto& f : *list) {
        if (f.is_object()) {
          into->push_back({f.value("check", ""), f.value("message", "")});
        }
      }
    }
  };
  findings("failed", &out.failed);
  findings("skipped", &out.skipped);
  if (const auto measured = r.find("measured"); measured != r.end() && measured->is_object()) {
    for (const auto& [name, value] : measured->items()) {
      if (value.is_number()) {
        out.measured[name] = value.get<double>();
      }
    }
  }
  return out;
}

std::string with_report(std::string_view extra, const Report& report, std::string_view key) {
  json doc = json::parse(extra, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    const bool empty = extra.find_first_not_of(" \t\r\n") == std::string_view::npos;
    doc = empty ? json::object() : json{{"text", std::string(extra)}};
  }
  json failed = json::array();
  for (const auto& f : report.failed) {
    failed.push_back(finding_json(f));
  }
  json& r = doc[std::string(key)];
  r = {{"ok", report.ok}, {"at", report.at}, {"failed", failed}};
  if (!report.source.empty()) {
    r["source"] = report.source;
  }
  if (!report.measured.empty()) {
    r["measured"] = report.measured;
  }
  if (!report.skipped.empty()) {
    json skipped = json::array();
    for (const auto& f : report.skipped) {
      skipped.push_back(finding_json(f));
    }
    r["skipped"] = std::move(skipped);
  }
  return doc.dump(-1, ' ', /*ensure_ascii=*/true);
}

bool same_result(const Report& a, const Report& b) {
  return a.ok == b.ok && a.failed == b.failed && a.source == b.source;
}

}  // namespace tightrope::health
