// The Slurm REST client: typed operations on slurmrestd for one cluster. Every call returns a
// Result whose Error says what kind of failure it was (error.hpp); transport failures are
// retried with capped exponential backoff where that is safe, a refused token is replaced once.
// Knows nothing of Kubernetes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/client.hpp"
#include "slurm/codec.hpp"
#include "slurm/error.hpp"
#include "slurm/model.hpp"
#include "slurm/token.hpp"

namespace tightrope::slurm {

// The most of one answer the client holds. A 10,000-node list is 27 MB (2.7 KB a node,
// docs/benchmarks.md): this leaves room for some 90,000 nodes, while a slurmrestd (or a proxy
// in front of it) that answers without end cannot take the operator's memory.
inline constexpr size_t kMaxAnswerBytes = size_t{256} << 20U;

// The deepest nesting of arrays and objects read_answer parses. Slurm's deepest answer, a job's
// job_resources down to its cores, is about a dozen levels; the parser builds every level it
// reads, so an answer of nothing but '[' would cost tens of bytes a byte before it could be
// refused as not a list.
inline constexpr size_t kMaxAnswerDepth = 64;

struct ClientOptions {
  std::string url;  // slurmrestd, e.g. "http://127.0.0.1:6820"
  const ApiVersion* version = &kV0044;
  std::chrono::milliseconds timeout{5000};    // per attempt
  size_t max_answer_bytes = kMaxAnswerBytes;  // a longer answer is a kProtocol error
  int max_attempts = 3;                       // for retryable failures
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{2000};
  std::string user_name;  // optional X-SLURM-USER-NAME
  // For an https slurmrestd, or for the API server's service proxy in front of it.
  http::TlsOptions tls;
  // Sent with every request: the API server's own credentials when its service proxy carries
  // the requests (it authenticates them and passes X-SLURM-USER-TOKEN on).
  std::vector<std::pair<std::string, std::string>> headers;
  // Told of every attempt's outcome (null: it succeeded), on the calling thread: for metrics.
  std::function<void(const std::string& method, const Error* error)> on_attempt;
};

struct NodeQuery {
  // Answer "nothing changed" (304) if no node changed at or after this second.
  std::optional<Time> changed_since;
  // Also list nodes in state FUTURE (created but never registered), which Slurm hides by default.
  bool include_future = false;
  // Per attempt, when longer than the client's: a list grows with the cluster (ChangeFeed).
  std::chrono::milliseconds timeout{0};
};

// Answer to a conditional list: `changed` is false when Slurm said nothing changed (304).
template <typename List>
struct Conditional {
  bool changed = true;
  List list;
};

// What slurmrestd answered, once read.
struct Answer {
  long status = 0;
  nlohmann::json doc;  // null for 304
};

// Reads one answer of slurmrestd (`what`: "GET /slurm/..." for errors): 304 as it is, a JSON
// body as a document, Slurm's error entries and HTTP errors as classified errors, anything else
// as a protocol error. `item_fields`, when given, are the only fields kept of each item of the
// answer's list (e.g. of each node of "nodes"): the rest is dropped as it is parsed. Every byte
// the client reads from slurmrestd goes through here (and test/fuzz/slurm_answer_fuzz.cpp).
Result<Answer> read_answer(const std::string& what, long status, std::string_view body,
                           const std::vector<std::string>* item_fields);

class Client {
 public:
  Client(ClientOptions options, std::shared_ptr<TokenSource> tokens);

  // Nodes.
  Result<Conditional<NodeList>> list_nodes(const NodeQuery& query = {});
  Result<Node> get_node(const std::string& name);  // from the full list: /node/{name} can be stale
  // One node's state and reason as slurmctld has them now, cheap at any cluster size; its
  // allocation (CPUs, GRES in use) may lag: read that from get_node.
  Result<Node> get_node_state(const std::string& name);
  Result<Done> update_node(const std::string& name, const NodeUpdate& update);
  Result<Done> drain(const std::string& name, const std::string& reason);
  Result<Done> resume(const std::string& name);
  Result<Done> undrain(const std::string& name);
  Result<Done> set_down(const std::string& name, const std::string& reason);
  // `node_conf` is a slurm.conf node line; it must carry a State= (e.g. FUTURE or CLOUD).
  Result<Done> create_node(const std::string& node_conf);
  Result<Done> delete_node(const std::string& name);

  // Jobs. With `changed_since`, an unchanged job table answers `changed == false` (slurmrestd
  // sends an empty list with last_update 0 rather than 304).
  // `timeout`: as NodeQuery's.
  Result<Conditional<JobList>> list_jobs(
      std::optional<Time> changed_since = {},
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  Result<Job> get_job(int64_t id);
  Result<int64_t> submit_job(const JobSubmission& job);
  Result<Done> update_job(int64_t id, const nlohmann::json& changes);  // job_desc_msg fields
  Result<Done> cancel_job(int64_t id);
  // External jobs (model.hpp): submitted once (never repeated on a timeout: the caller finds
  // the job by its admin comment), updated while pending.
  Result<int64_t> submit_external_job(const ExternalJob& job);
  Result<Done> update_external_job(int64_t id, const ExternalJob& job);
  // Where a job's resources are, node by node (GET /job/{id}: the change feed does not keep it).
  Result<std::vector<JobNodeAllocation>> job_allocation(int64_t id);

  // Partitions and reservations.
  Result<std::vector<Partition>> list_partitions();
  Result<std::vector<Reservation>> list_reservations();
  Result<Reservation> get_reservation(const std::string& name);
  Result<Done> create_reservation(const Reservation& reservation);
  Result<Done> update_reservation(const std::string& name, const ReservationUpdate& update);
  Result<Done> delete_reservation(const std::string& name);

  // The controller.
  Result<Ping> ping();  // not an authentication check: slurmrestd answers without asking
  Result<Diag> diag();
  // slurmdbd through slurmrestd (its openapi/slurmdbd plugin): Done when slurmdbd answers.
  Result<Done> accounting_diag();
  Result<Done> reconfigure();

  const ClientOptions& options() const { return options_; }

 private:
  enum class Safety { kIdempotent, kOnce };
  // `item_fields`: as read_answer's. `timeout`: per attempt, when longer than the client's.
  Result<Answer> call(const std::string& method, const std::string& path,
                      const std::optional<nlohmann::json>& body, Safety safety,
                      const std::vector<std::string>* item_fields = nullptr,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  Result<Answer> attempt(const std::string& method, const std::string& path,
                         const std::string& body, const std::vector<std::string>* item_fields,
                         std::chrono::milliseconds timeout);
  std::string api(const std::string& path) const;
  static Result<Done> done(const Result<Answer>& answer);
  static Result<int64_t> submitted(const Result<Answer>& answer);  // its job_id

  ClientOptions options_;
  std::shared_ptr<TokenSource> tokens_;
  http::Client http_;
};

}  // namespace tightrope::slurm
