// Typed failures of the Slurm REST API. slurmrestd reports errors in two places, the HTTP status
// and an `errors[]` array in the body (an unknown node is HTTP 200 with an error entry), so both
// are read and mapped to one kind that callers can act on.
#pragma once

#include <string>
#include <vector>

#include "base/result.hpp"

namespace tightrope::slurm {

enum class ErrorKind {
  kNotFound,      // no such node, job or reservation
  kUnauthorized,  // missing, expired or wrongly signed token; or a user without permission
  kInvalid,       // Slurm refused the request as it stands (bad state transition, bad field)
  kUnavailable,   // slurmrestd or slurmctld cannot be reached, or did not answer in time
  kProtocol,      // an answer we cannot read: unknown endpoint or version, malformed JSON
};

const char* to_string(ErrorKind kind);

// One entry of slurmrestd's `errors[]`.
struct ApiErrorEntry {
  int error_number = 0;
  std::string error;        // Slurm's text for the number, e.g. "Invalid node name specified"
  std::string description;  // what failed, e.g. "Failure to update node n1"
  std::string source;       // where, e.g. "_update_node"
};

struct Error {
  ErrorKind kind = ErrorKind::kProtocol;
  long http_status = 0;  // 0: no HTTP answer
  std::string message;   // "POST /slurm/v0.0.44/node/n1: 422 Invalid node state transition"
  std::vector<ApiErrorEntry> entries;

  // True when a later identical request may succeed without anyone changing it.
  bool transient() const { return kind == ErrorKind::kUnavailable; }
};

template <typename T>
using Result = tightrope::Result<T, Error>;

// Slurm's own error numbers that decide a kind (slurm/slurm_errno.h).
namespace errno_ {
inline constexpr int kProtocolAuthentication = 1007;
inline constexpr int kControllerUnreachable = 1800;
inline constexpr int kInvalidUserId = 2010;
inline constexpr int kInvalidJobId = 2017;
inline constexpr int kInvalidNodeName = 2018;
inline constexpr int kReservationInvalid = 2053;
}  // namespace errno_

// Maps an HTTP status and the entries of `errors[]` to an Error. `what` is the request, for the
// message ("GET /slurm/v0.0.44/nodes"). Statuses 2xx with no entries are not errors: callers
// check before calling.
Error classify(const std::string& what, long http_status, std::vector<ApiErrorEntry> entries,
               const std::string& plain_body = {});

}  // namespace tightrope::slurm
