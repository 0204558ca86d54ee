// What every builder shares: the labels and owner reference of an object the operator makes,
// the merge of a user's pod template and container over the operator's own, and content
// hashes. Pure: no I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op::build {

// Default images: Slinky's, so a manifest that sets none runs the same containers.
inline constexpr std::string_view kImageRegistry = "ghcr.io/slinkyproject/";
inline constexpr std::string_view kSlurmImageTag = "26.05-ubuntu26.04";
std::string slurm_image(std::string_view component);  // "slurmctld" -> registry/slurmctld:tag
inline constexpr std::string_view kHelperImage = "alpine:latest";

inline constexpr int kSlurmctldPort = 6817;
inline constexpr int kSlurmdPort = 6818;
inline constexpr int kSlurmdbdPort = 6819;
inline constexpr int kSlurmrestdPort = 6820;
inline constexpr int kSlurmUid = 401;  // the slurm user of Slinky's images
inline constexpr int kNobodyUid = 65534;

// The owner of an object: a resource of ours (kind, name, uid).
struct Owner {
  std::string kind;
  std::string name;
  std::string uid;
};

// ownerReferences entry making `owner` the controller (garbage collection deletes with it).
nlohmann::json owner_reference(const Owner& owner);

// Labels of everything built for one component instance:
// app.kubernetes.io/{name,instance,component,part-of,managed-by}.
nlohmann::json component_labels(std::string_view name, std::string_view instance,
                                std::string_view component);
// The selector subset of component_labels (name and instance): stable for a workload's life.
nlohmann::json selector_labels(std::string_view name, std::string_view instance);

// metadata for an owned object: name, namespace, labels, ownerReferences.
nlohmann::json object_meta(std::string_view name, std::string_view namespace_name,
                           const nlohmann::json& labels, const Owner& owner);

// The object's metadata.annotations[key], or "" when it has none (or no string).
std::string annotation(const nlohmann::json& object, std::string_view key);

// A user's container or pod spec over the operator's: objects merge key by key, lists of named
// things (containers, initContainers, volumes, volumeMounts, env, ports, ...) merge by name
// with the user's entry merged over the operator's, other lists and scalars are the user's.
nlohmann::json merge_over(const nlohmann::json& base, const nlohmann::json& user);

// The native sidecar "logfile" (an init container that keeps running) that makes
// /var/log/slurm/<file> a FIFO and copies it to its stdout, so `kubectl logs -c logfile` shows
// the daemon's log file; `user` (the resource's logfile container) is merged over it. The pod
// mounts the memory emptyDir logfile_volume() at /var/log/slurm in both containers.
nlohmann::json logfile_sidecar(std::string_view file, const nlohmann::json& user);
nlohmann::json logfile_volume();

// The container security context of every Slurm daemon that needs no privilege (slurmctld,
// slurmrestd, slurmdbd and the helpers beside them): no capability, no privilege escalation and
// a read-only root filesystem; what a daemon writes goes to the volumes its pod mounts. The
// resource's own container fields are merged over it. slurmd (cgroups, devices, user switching)
// and the login container's sshd (which becomes the user logging in) are the exceptions.
nlohmann::json unprivileged_daemon();

// A pod template: metadata labels/annotations (the user's added to the operator's) and the
// spec merged as above.
nlohmann::json pod_template(const nlohmann::json& labels, const nlohmann::json& annotations,
                            const nlohmann::json& base_spec, const api::PodTemplate& user);

// A Service from the operator's spec and the user's template (metadata and spec merged, port and
// nodePort of the first port).
nlohmann::json service(std::string_view name, std::string_view namespace_name,
                       const nlohmann::json& labels, const Owner& owner,
                       const nlohmann::json& base_spec, const api::ServiceTemplate& user);

std::string sha256_hex(std::string_view data);

// ASCII lower case: Slurm's keys and GPU product names compare without case.
std::string lower(std::string_view s);

// The parts with `separator` between them, for messages.
std::string join(const std::vector<std::string>& parts, const std::string& separator);

}  // namespace tightrope::op::build
