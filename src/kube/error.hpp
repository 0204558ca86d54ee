// Typed failures of the Kubernetes API. The API server answers a failed request with a Status
// object (code, reason, message, details); a failure to reach it has no Status. Both become one
// Error whose kind a caller can act on: a conflict is retried, a not-found is often success.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace tightrope::kube {

enum class ErrorKind {
  kNotFound,         // 404
  kAlreadyExists,    // 409 AlreadyExists
  kConflict,         // 409 Conflict: a stale resourceVersion, or a server-side apply field conflict
  kGone,             // 410: a resourceVersion too old to watch or list from
  kInvalid,          // 400, 422: the object or request as it stands is refused
  kUnauthorized,     // 401
  kForbidden,        // 403
  kTooManyRequests,  // 429 after the retries ran out
  kTimeout,          // 504 or 408, or our own deadline
  kUnavailable,      // no answer: connection refused, reset, TLS failure, 5xx
  kProtocol,         // an answer we cannot read
  kCancelled,        // the caller stopped the request (shutdown)
};

const char* to_string(ErrorKind kind);

// The API server's metav1.Status, as far as a caller needs it.
struct Status {
  int code = 0;
  std::string reason;   // "NotFound", "Conflict", "Expired", ...
  std::string message;  // the server's own words
  struct Cause {
    std::string type;  // "FieldManagerConflict", "FieldValueInvalid", ...
    std::string field;
    std::string message;
  };
  std::vector<Cause> causes;  // details.causes
};

struct Error {
  ErrorKind kind = ErrorKind::kProtocol;
  long http_status = 0;  // 0: no HTTP answer
  std::string message;  // "PUT /api/v1/namespaces/a/configmaps/b: 409 Conflict: the object has been
                        // modified"
  Status status;

  // A server-side apply refused because another field manager owns a field (force takes it).
  bool is_apply_conflict() const;
  bool transient() const {
    return kind == ErrorKind::kUnavailable || kind == ErrorKind::kTimeout ||
           kind == ErrorKind::kTooManyRequests;
  }
};

template <typename T>
using Result = tightrope::Result<T, Error>;

// The Error for an HTTP answer that is not 2xx; `what` is the request ("GET /api/v1/pods").
Error error_from_response(const std::string& what, long http_status, const std::string& body);
// A Status object (from a body or from a watch ERROR event).
Status parse_status(const nlohmann::json& doc);
ErrorKind kind_for(long http_status, const std::string& reason);

}  // namespace tightrope::kube
