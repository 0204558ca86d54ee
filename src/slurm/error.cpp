#include "slurm/error.hpp"

#include <algorithm>

#include "base/text.hpp"

namespace tightrope::slurm {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound:
      return "not found";
    case ErrorKind::kUnauthorized:
      return "unauthorized";
    case ErrorKind::kInvalid:
      return "invalid";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kProtocol:
      return "protocol";
  }
  return "unknown";
}

namespace {

bool mentions(const std::vector<ApiErrorEntry>& entries, int number) {
  return std::any_of(entries.begin(), entries.end(),
                     [number](const ApiErrorEntry& e) { return e.error_number == number; });
}

ErrorKind kind_for(long status, const std::vector<ApiErrorEntry>& entries) {
  if (mentions(entries, errno_::kControllerUnreachable)) {
    return ErrorKind::kUnavailable;
  }
  if (mentions(entries, errno_::kProtocolAuthentication) ||
      mentions(entries, errno_::kInvalidUserId)) {
    return ErrorKind::kUnauthorized;
  }
  if (mentions(entries, errno_::kInvalidNodeName) || mentions(entries, errno_::kInvalidJobId) ||
      mentions(entries, errno_::kReservationInvalid)) {
    return ErrorKind::kNotFound;
  }
  // GET of a reservation that does not exist while others do: 9000 ("Query empty or not RFC7320
  // compliant") with the description "Unable to find reservation X".
  if (std::any_of(entries.begin(), entries.end(), [](const ApiErrorEntry& e) {
        return e.description.rfind("Unable to find ", 0) == 0;
      })) {
    return ErrorKind::kNotFound;
  }
  // GET of an unknown node or reservation: HTTP 200 with entries numbered 0 ("No error"),
  // e.g. "Failure to query node X" or "Unable to query reservations".
  if (status == 200 && !entries.empty() &&
      std::all_of(entries.begin(), entries.end(),
                  [](const ApiErrorEntry& e) { return e.error_number == 0; })) {
    return ErrorKind::kNotFound;
  }
  switch (status) {
    case 401:
    case 403:
    case 511:  // slurmrestd's answer to a token slurmctld rejected
      return ErrorKind::kUnauthorized;
    case 404:  // slurmrestd answers unknown paths with 404 and plain text
      return ErrorKind::kProtocol;
    case 408:
    case 429:
    case 502:
    case 503:
    case 504:
      return ErrorKind::kUnavailable;
    default:
      break;
  }
  if (status >= 400 && status < 600) {
    return ErrorKind::kInvalid;
  }
  return entries.empty() ? ErrorKind::kProtocol : ErrorKind::kInvalid;
}

}  // namespace

Error classify(const std::string& what, long http_status, std::vector<ApiErrorEntry> entries,
               const std::string& plain_body) {
  Error e;
  e.kind = kind_for(http_status, entries);
  e.http_status = http_status;
  e.message = what + ": " + std::to_string(http_status);
  if (!entries.empty()) {
    // The last entry is the most specific in slurmrestd's answers ("Invalid node state
    // transition" after the parser's complaint), but all are kept for the log.
    for (const auto& entry : entries) {
      e.message += " " + (entry.error.empty() ? entry.description : entry.error);
      if (!entry.description.empty() && !entry.error.empty()) {
        e.message += " (" + entry.description + ")";
      }
      e.message += ";";
    }
    e.message.pop_back();
  } else if (!plain_body.empty()) {
    // Whatever came instead of JSON (an HTML error page, binary garbage): its start, as text
    // that a condition or an Event can carry.
    e.message += " " + printable_text(plain_body, 200);
  }
  e.entries = std::move(entries);
  return e;
}

}  // namespace tightrope::slurm
