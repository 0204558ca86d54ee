#include "slurm/codec.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/text.hpp"

namespace tightrope::slurm {
namespace {

using nlohmann::json;

// Thrown inside this file only; every public decoder turns it into a kProtocol Error.
struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string path_of(std::string_view parent, std::string_view key) {
  return std::string(parent) + "." + std::string(key);
}

const json* field(const json& obj, std::string_view key) {
  if (!obj.is_object()) {
    return nullptr;
  }
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string str(const json& obj, std::string_view key, std::string_view where) {
  const json* f = field(obj, key);
  if (f == nullptr) {
    return {};
  }
  if (!f->is_string()) {
    throw DecodeError(path_of(where, key) + ": expected a string, got " + f->type_name());
  }
  return f->get<std::string>();
}

// Slurm writes numbers either plainly or as {"set": bool, "infinite": bool, "number": N}.
struct SlurmNumber {
  bool set = false;
  bool infinite = false;
  int64_t number = 0;
};

SlurmNumber num(const json& obj, std::string_view key, std::string_view where) {
  const json* f = field(obj, key);
  if (f == nullptr) {
    return {};
  }
  if (f->is_number_integer()) {
    return {true, false, f->get<int64_t>()};
  }
  if (f->is_object()) {
    SlurmNumber n;
    const json* set = field(*f, "set");
    const json* inf = field(*f, "infinite");
    const json* number = field(*f, "number");
    if ((set != nullptr && !set->is_boolean()) || (inf != nullptr && !inf->is_boolean()) ||
        (number != nullptr && !number->is_number_integer())) {
      throw DecodeError(path_of(where, key) + ": malformed number object");
    }
    n.set = set != nullptr && set->get<bool>();
    n.infinite = inf != nullptr && inf->get<bool>();
    n.number = number == nullptr ? 0 : number->get<int64_t>();
    return n;
  }
  throw DecodeError(path_of(where, key) + ": expected a number, got " + f->type_name());
}

int64_t integer(const json& obj, std::string_view key, std::string_view where) {
  const SlurmNumber n = num(obj, key, where);
  return n.set && !n.infinite ? n.number : 0;
}

std::optional<Time> time_of(const json& obj, std::string_view key, std::string_view where) {
  const SlurmNumber n = num(obj, key, where);
  // Beyond what a time point holds (year 2262 in nanoseconds) no time is meant: unknown, as 0
  // is (an overflow found by test/fuzz/slurm_codec_fuzz.cpp).
  constexpr int64_t kLatest = 9'000'000'000;
  if (!n.set || n.infinite || n.number <= 0 || n.number > kLatest) {
    return std::nullopt;
  }
  return Time(std::chrono::seconds(n.number));
}

// A list of words: a JSON array of strings, or one comma-separated string (reservations).
std::vector<std::string> words(const json& obj, std::string_view key, std::string_view where) {
  const json* f = field(obj, key);
  std::vector<std::string> out;
  if (f == nullptr) {
    return out;
  }
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    size_t start = 0;
    while (start < s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) {
        comma = s.size();
      }
      if (comma > start) {
        out.push_back(s.substr(start, comma - start));
      }
      start = comma + 1;
    }
    return out;
  }
  if (!f->is_array()) {
    throw DecodeError(path_of(where, key) + ": expected a list, got " + f->type_name());
  }
  for (const auto& w : *f) {
    if (!w.is_string()) {
      throw DecodeError(path_of(where, key) + ": expected strings in the list");
    }
    out.push_back(w.get<std::string>());
  }
  return out;
}

// A hostlist field: a string, or a list of names joined with commas.
std::string hostlist(const json& obj, std::string_view key, std::string_view where) {
  const json* f = field(obj, key);
  if (f != nullptr && f->is_array()) {
    std::string out;
    for (const auto& w : words(obj, key, where)) {
      out += (out.empty() ? "" : ",") + w;
    }
    return out;
  }
  return str(obj, key, where);
}

const json& array_at(const json& doc, std::string_view key) {
  const json* f = field(doc, key);
  if (f == nullptr || !f->is_array()) {
    throw DecodeError(std::string(key) + ": expected a list");
  }
  return *f;
}

// Decodes each element of the list `doc[key]` with `one(element, "key[i]")`.
template <typename T, typename F>
std::vector<T> each(const json& doc, std::string_view key, F&& one) {
  const json& list = array_at(doc, key);
  std::vector<T> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(one(list[i], std::string(key) + "[" + std::to_string(i) + "]"));
  }
  return out;
}

template <typename F>
auto guarded(F&& decode) -> Result<decltype(decode())> {
  try {
    return decode();
  } catch (const DecodeError& e) {
    return fail(
        Error{ErrorKind::kProtocol, 200, std::string("unexpected answer: ") + e.what(), {}});
  } catch (const json::exception& e) {
    return fail(
        Error{ErrorKind::kProtocol, 200, std::string("unexpected answer: ") + e.what(), {}});
  }
}

Node decode_node(const json& n, const ApiVersion& v, const std::string& where) {
  if (!n.is_object()) {
    throw DecodeError(where + ": expected an object");
  }
  Node node;
  node.name = str(n, "name", where);
  if (node.name.empty()) {
    throw DecodeError(where + ".name: missing");
  }
  node.state = words(n, v.node_state, where);
  // Shown on pods and Nodes: an administrator's line breaks or terminal escapes stay out of them.
  node.reason = printable_text(str(n, "reason", where));
  node.reason_set_by = str(n, v.node_reason_set_by, where);
  node.reason_changed_at = time_of(n, v.node_reason_changed_at, where);
  node.features = words(n, "features", where);
  node.active_features = words(n, "active_features", where);
  node.comment = str(n, "comment", where);
  node.extra = str(n, "extra", where);
  node.topology = str(n, v.node_topology, where);
  node.gres = str(n, "gres", where);
  node.gres_used = str(n, "gres_used", where);
  node.cpus = integer(n, "cpus", where);
  node.alloc_cpus = integer(n, "alloc_cpus", where);
  node.real_memory_mib = integer(n, "real_memory", where);
  node.alloc_memory_mib = integer(n, "alloc_memory", where);
  node.address = str(n, "address", where);
  node.hostname = str(n, "hostname", where);
  node.reservation = str(n, "reservation", where);
  node.partitions = words(n, "partitions", where);
  node.boot_time = time_of(n, "boot_time", where);
  node.last_busy = time_of(n, "last_busy", where);
  return node;
}

Job decode_job(const json& j, const ApiVersion& v, const std::string& where) {
  if (!j.is_object()) {
    throw DecodeError(where + ": expected an object");
  }
  Job job;
  job.id = integer(j, "job_id", where);
  job.name = str(j, "name", where);
  job.state = words(j, v.job_state, where);
  job.nodes = str(j, "nodes", where);
  job.user = str(j, v.job_user, where);
  job.account = str(j, "account", where);
  job.partition = str(j, "partition", where);
  job.state_reason = str(j, "state_reason", where);
  job.start_time = time_of(j, "start_time", where);
  job.end_time = time_of(j, "end_time", where);
  const SlurmNumber limit = num(j, "time_limit", where);
  if (limit.set && !limit.infinite) {
    job.time_limit = std::chrono::minutes(limit.number);
  }
  job.flags = words(j, "flags", where);
  job.admin_comment = str(j, "admin_comment", where);
  job.priority = integer(j, "priority", where);
  return job;
}

json number_object(int64_t n) {
  return {{"set", true}, {"infinite", false}, {"number", n}};
}

int64_t seconds_of(Time t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

std::vector<std::string> node_fields(const ApiVersion& v) {
  return {"name",
          "reason",
          "features",
          "active_features",
          "comment",
          "extra",
          "gres",
          "gres_used",
          "cpus",
          "alloc_cpus",
          "real_memory",
          "alloc_memory",
          "address",
          "hostname",
          "reservation",
          "partitions",
          "boot_time",
          "last_busy",
          std::string(v.node_state),
          std::string(v.node_reason_set_by),
          std::string(v.node_reason_changed_at),
          std::string(v.node_topology)};
}

std::vector<std::string> job_fields(const ApiVersion& v) {
  return {"job_id",
          "name",
          "nodes",
          "account",
          "partition",
          "state_reason",
          "start_time",
          "end_time",
          "time_limit",
          "flags",
          "admin_comment",
          "priority",
          std::string(v.job_state),
          std::string(v.job_user)};
}

json encode_external_job(const ExternalJob& job, const ApiVersion& /*v*/) {
  json desc = {{"name", job.name},
               {"flags", {"EXTERNAL_JOB"}},
               {"current_working_directory", "/tmp"},
               {"tasks", job.tasks},
               {"minimum_nodes", job.min_nodes},
               {"maximum_nodes", job.max_nodes},
               {"shared", job.exclusive ? json::array({"none"}) : json::array()},
               {"excluded_nodes", job.excluded_nodes},
               {"admin_comment", job.admin_comment}};
  const auto set_text = [&desc](const char* key, const std::string& value) {
    if (!value.empty()) {
      desc[key] = value;
    }
  };
  set_text("partition", job.partition);
  set_text("account", job.account);
  set_text("qos", job.qos);
  set_text("reservation", job.reservation);
  set_text("constraints", job.constraints);
  set_text("licenses", job.licenses);
  set_text("wckey", job.wckey);
  set_text("user_id", job.user);
  set_text("group_id", job.group);
  set_text("mcs_label", job.mcs_label);
  set_text("tres_per_task", job.tres_per_task);
  if (job.cpus_per_task > 0) {
    desc["cpus_per_task"] = job.cpus_per_task;
  }
  if (job.memory_per_cpu_mib > 0) {
    desc["memory_per_cpu"] = number_object(job.memory_per_cpu_mib);
  }
  if (job.tasks_per_node) {
    desc["tasks_per_node"] = *job.tasks_per_node;
  }
  if (job.priority) {
    desc["priority"] = number_object(*job.priority);
  }
  if (job.time_limit) {
    desc["time_limit"] = number_object(job.time_limit->count());
  }
  return desc;
}

Result<std::vector<JobNodeAllocation>> decode_job_allocation(const json& job,
                                                             const ApiVersion& /*v*/) {
  return guarded([&] {
    std::vector<JobNodeAllocation> out;
    const json* resources = field(job, "job_resources");
    const json* nodes = resources != nullptr ? field(*resources, "nodes") : nullptr;
    const json* allocation = nodes != nullptr ? field(*nodes, "allocation") : nullptr;
    if (allocation == nullptr || !allocation->is_array()) {
      return out;
    }
    for (const json& a : *allocation) {
      const std::string where = "job_resources.nodes.allocation[]";
      JobNodeAllocation entry;
      entry.node = str(a, "name", where);
      const json* cpus = field(a, "cpus");
      entry.cpus = cpus != nullptr ? integer(*cpus, "count", where + ".cpus") : 0;
      const json* memory = field(a, "memory");
      entry.memory_mib = memory != nullptr ? integer(*memory, "allocated", where + ".memory") : 0;
      out.push_back(std::move(entry));
    }
    return out;
  });
}

std::string Node::base_state() const {
  for (const auto& word : state) {
    for (const std::string_view base : kBaseNodeStates) {
      if (word == base) {
        return word;
      }
    }
  }
  return "UNKNOWN";
}

std::vector<std::string> Node::flags() const {
  std::vector<std::string> out;
  const std::string base = base_state();
  for (const auto& word : state) {
    if (word != base) {
      out.push_back(word);
    }
  }
  return out;
}

bool Node::has(const std::string& word) const {
  return std::find(state.begin(), state.end(), word) != state.end();
}

bool Job::has(const std::string& word) const {
  return std::find(state.begin(), state.end(), word) != state.end();
}

bool Job::external() const {
  return std::find(flags.begin(), flags.end(), "EXTERNAL_JOB") != flags.end();
}

bool Job::active() const {
  return has("PENDING") || has("RUNNING") || has("SUSPENDED") || has("COMPLETING") ||
         has("CONFIGURING");
}

std::vector<ApiErrorEntry> decode_errors(const json& doc) {
  std::vector<ApiErrorEntry> out;
  const json* errors = field(doc, "errors");
  if (errors == nullptr || !errors->is_array()) {
    return out;
  }
  for (const auto& e : *errors) {
    if (!e.is_object()) {
      continue;
    }
    ApiErrorEntry entry;
    if (const json* n = field(e, "error_number"); n != nullptr && n->is_number_integer()) {
      entry.error_number = n->get<int>();
    }
    auto text = [&e](const char* key) {
      const json* f = field(e, key);
      return f != nullptr && f->is_string() ? f->get<std::string>() : std::string{};
    };
    entry.error = text("error");
    entry.description = text("description");
    entry.source = text("source");
    out.push_back(std::move(entry));
  }
  return out;
}

Result<NodeList> decode_nodes(const json& doc, const ApiVersion& v) {
  return guarded([&] {
    NodeList list;
    list.nodes = each<Node>(doc, "nodes", [&](const json& n, const std::string& where) {
      return decode_node(n, v, where);
    });
    list.last_update = time_of(doc, "last_update", "");
    return list;
  });
}

Result<JobList> decode_jobs(const json& doc, const ApiVersion& v) {
  return guarded([&] {
    JobList list;
    list.jobs = each<Job>(doc, "jobs", [&](const json& j, const std::string& where) {
      return decode_job(j, v, where);
    });
    list.last_update = time_of(doc, "last_update", "");
    return list;
  });
}

Result<std::vector<Partition>> decode_partitions(const json& doc, const ApiVersion& /*v*/) {
  return guarded([&] {
    return each<Partition>(doc, "partitions", [](const json& p, const std::string& where) {
      Partition part;
      part.name = str(p, "name", where);
      part.node_sets = str(p, "node_sets", where);
      if (const json* nodes = field(p, "nodes"); nodes != nullptr) {
        part.nodes = str(*nodes, "configured", where + ".nodes");
        part.total_nodes = integer(*nodes, "total", where + ".nodes");
      }
      if (const json* cpus = field(p, "cpus"); cpus != nullptr) {
        part.total_cpus = integer(*cpus, "total", where + ".cpus");
      }
      if (const json* state = field(p, "partition"); state != nullptr) {
        part.state = words(*state, "state", where + ".partition");
      }
      return part;
    });
  });
}

Result<std::vector<Reservation>> decode_reservations(const json& doc, const ApiVersion& /*v*/) {
  return guarded([&] {
    return each<Reservation>(doc, "reservations", [](const json& r, const std::string& where) {
      Reservation res;
      res.name = str(r, "name", where);
      res.nodes = hostlist(r, "node_list", where);
      res.start_time = time_of(r, "start_time", where);
      res.end_time = time_of(r, "end_time", where);
      res.flags = words(r, "flags", where);
      res.users = words(r, "users", where);
      res.partition = str(r, "partition", where);
      return res;
    });
  });
}

Result<Ping> decode_ping(const json& doc, const ApiVersion& /*v*/) {
  return guarded([&] {
    const json& pings = array_at(doc, "pings");
    // The first entry is the primary slurmctld; with HA, later entries are the backups.
    for (const auto& p : pings) {
      Ping ping;
      ping.hostname = str(p, "hostname", "pings[]");
      const json* responding = field(p, "responding");
      ping.responding =
          responding != nullptr && responding->is_boolean() && responding->get<bool>();
      ping.mode = str(p, "mode", "pings[]");
      const json* primary = field(p, "primary");
      ping.primary = primary != nullptr && primary->is_boolean() && primary->get<bool>();
      ping.latency_us = integer(p, "latency", "pings[]");
      if (ping.responding || &p == &pings.back()) {
        return ping;
      }
    }
    throw DecodeError("pings: empty");
  });
}

Result<Diag> decode_diag(const json& doc, const ApiVersion& /*v*/) {
  return guarded([&] {
    const json* s = field(doc, "statistics");
    if (s == nullptr || !s->is_object()) {
      throw DecodeError("statistics: expected an object");
    }
    Diag d;
    d.server_thread_count = integer(*s, "server_thread_count", "statistics");
    d.agent_queue_size = integer(*s, "agent_queue_size", "statistics");
    d.jobs_running = integer(*s, "jobs_running", "statistics");
    d.jobs_pending = integer(*s, "jobs_pending", "statistics");
    d.schedule_cycle_last_us = integer(*s, "schedule_cycle_last", "statistics");
    d.schedule_queue_length = integer(*s, "schedule_queue_length", "statistics");
    d.req_time = time_of(*s, "req_time", "statistics");
    d.req_time_start = time_of(*s, "req_time_start", "statistics");
    return d;
  });
}

json encode_node_update(const NodeUpdate& u, const ApiVersion& v) {
  json body = json::object();
  if (!u.state.empty()) {
    body[std::string(v.node_state)] = u.state;
  }
  if (u.reason) {
    body["reason"] = *u.reason;
  }
  if (u.features) {
    body["features"] = *u.features;
  }
  if (u.active_features) {
    body[std::string(v.node_active_features_update)] = *u.active_features;
  }
  if (u.comment) {
    body["comment"] = *u.comment;
  }
  if (u.topology) {
    body[std::string(v.node_topology_update)] = *u.topology;
  }
  if (u.address) {
    body["address"] = json::array({*u.address});
  }
  return body;
}

json encode_job_submission(const JobSubmission& job, const ApiVersion& /*v*/) {
  json desc = {{"name", job.name},
               {"tasks", job.tasks},
               {"current_working_directory", job.working_directory},
               {"environment", job.environment},
               {"script", job.script}};
  if (!job.partition.empty()) {
    desc["partition"] = job.partition;
  }
  if (!job.required_nodes.empty()) {
    desc["required_nodes"] = job.required_nodes;
  }
  if (job.time_limit) {
    desc["time_limit"] = number_object(job.time_limit->count());
  }
  if (!job.reservation.empty()) {
    desc["reservation"] = job.reservation;
  }
  if (job.exclusive) {
    desc["exclusive"] = true;
  }
  return {{"job", desc}};
}

json encode_reservation(const Reservation& r, const ApiVersion& /*v*/) {
  json body = {{"name", r.name}, {"flags", r.flags}, {"users", r.users}};
  if (!r.nodes.empty()) {
    body["node_list"] = json::array({r.nodes});
  }
  if (!r.partition.empty()) {
    body["partition"] = r.partition;
  }
  if (r.start_time) {
    body["start_time"] = number_object(seconds_of(*r.start_time));
  }
  if (r.end_time) {
    body["end_time"] = number_object(seconds_of(*r.end_time));
  }
  return body;
}

json encode_reservation_update(const std::string& name, const ReservationUpdate& u,
                               const ApiVersion& /*v*/) {
  json body = {{"name", name}};
  if (u.nodes) {
    body["node_list"] = json::array({*u.nodes});
  }
  if (u.start_time) {
    body["start_time"] = number_object(seconds_of(*u.start_time));
  }
  if (u.end_time) {
    body["end_time"] = number_object(seconds_of(*u.end_time));
  }
  if (u.flags) {
    body["flags"] = *u.flags;
  }
  if (u.users) {
    body["users"] = *u.users;
  }
  return body;
}

}  // namespace tightrope::slurm
