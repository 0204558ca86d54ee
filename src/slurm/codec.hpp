// JSON of slurmrestd's data parsers <-> the typed model. A data parser version is a table of
// path and field names (ApiVersion); the decoders read only what the model holds and ignore the
// rest, so a new version that renames a field is a new table, not new code.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "slurm/error.hpp"
#include "slurm/model.hpp"

namespace tightrope::slurm {

struct ApiVersion {
  std::string_view name;  // "v0.0.44"
  // Node fields.
  std::string_view node_state = "state";
  std::string_view node_reason_set_by = "reason_set_by_user";
  std::string_view node_reason_changed_at = "reason_changed_at";
  std::string_view node_topology = "topology";
  std::string_view node_topology_update = "topology_str";
  std::string_view node_active_features_update = "features_act";
  // Job fields.
  std::string_view job_state = "job_state";
  std::string_view job_user = "user_name";
};

// Slurm 25.11 and 26.05 serve both; their node and job fields that we read are the same.
inline constexpr ApiVersion kV0044{"v0.0.44"};
inline constexpr ApiVersion kV0045{"v0.0.45"};

// The decoders return kProtocol errors naming the field when a document does not have the
// shape the version promises; unknown fields are ignored.
Result<NodeList> decode_nodes(const nlohmann::json& doc, const ApiVersion& v);
// The fields of each node (job) that decode_nodes (decode_jobs) reads: a client need not keep
// any other as it parses an answer.
std::vector<std::string> node_fields(const ApiVersion& v);
std::vector<std::string> job_fields(const ApiVersion& v);
Result<JobList> decode_jobs(const nlohmann::json& doc, const ApiVersion& v);
Result<std::vector<Partition>> decode_partitions(const nlohmann::json& doc, const ApiVersion& v);
Result<std::vector<Reservation>> decode_reservations(const nlohmann::json& doc,
                                                     const ApiVersion& v);
Result<Ping> decode_ping(const nlohmann::json& doc, const ApiVersion& v);
Result<Diag> decode_diag(const nlohmann::json& doc, const ApiVersion& v);
std::vector<ApiErrorEntry> decode_errors(const nlohmann::json& doc);

nlohmann::json encode_node_update(const NodeUpdate& update, const ApiVersion& v);
nlohmann::json encode_job_submission(const JobSubmission& job, const ApiVersion& v);
// The job_desc_msg of an external job: {"job": desc} to submit; desc alone to update a
// pending one (less the flags, which an update may not change).
nlohmann::json encode_external_job(const ExternalJob& job, const ApiVersion& v);
// Per node, what a job holds (its job_resources); empty before it has nodes.
Result<std::vector<JobNodeAllocation>> decode_job_allocation(const nlohmann::json& job,
                                                             const ApiVersion& v);
nlohmann::json encode_reservation(const Reservation& reservation, const ApiVersion& v);
nlohmann::json encode_reservation_update(const std::string& name, const ReservationUpdate& update,
                                         const ApiVersion& v);

}  // namespace tightrope::slurm
