#include "kube/error.hpp"

#include "base/text.hpp"

namespace tightrope::kube {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound:
      return "not found";
    case ErrorKind::kAlreadyExists:
      return "already exists";
    case ErrorKind::kConflict:
      return "conflict";
    case ErrorKind::kGone:
      return "gone";
    case ErrorKind::kInvalid:
      return "invalid";
    case ErrorKind::kUnauthorized:
      return "unauthorized";
    case ErrorKind::kForbidden:
      return "forbidden";
    case ErrorKind::kTooManyRequests:
      return "too many requests";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kProtocol:
      return "protocol";
    case ErrorKind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

bool Error::is_apply_conflict() const {
  if (kind != ErrorKind::kConflict) {
    return false;
  }
  for (const auto& cause : status.causes) {
    if (cause.type == "FieldManagerConflict") {
      return true;
    }
  }
  return false;
}

ErrorKind kind_for(long http_status, const std::string& reason) {
  switch (http_status) {
    case 400:
    case 422:
      return ErrorKind::kInvalid;
    case 401:
      return ErrorKind::kUnauthorized;
    case 403:
      return ErrorKind::kForbidden;
    case 404:
      return ErrorKind::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? ErrorKind::kAlreadyExists : ErrorKind::kConflict;
    case 410:
      return ErrorKind::kGone;
    case 408:
    case 504:
      return ErrorKind::kTimeout;
    case 429:
      return ErrorKind::kTooManyRequests;
    default:
      break;
  }
  if (http_status >= 500) {
    return ErrorKind::kUnavailable;
  }
  return ErrorKind::kProtocol;
}

Status parse_status(const nlohmann::json& doc) {
  Status status;
  if (!doc.is_object()) {
    return status;
  }
  status.code = doc.value("code", 0);
  status.reason = doc.value("reason", "");
  status.message = doc.value("message", "");
  const auto details = doc.find("details");
  if (details != doc.end() && details->is_object()) {
    const auto causes = details->find("causes");
    if (causes != details->end() && causes->is_array()) {
      for (const auto& c : *causes) {
        if (c.is_object()) {
          status.causes.push_back(
              {c.value("reason", ""), c.value("field", ""), c.value("message", "")});
        }
      }
    }
  }
  return status;
}

Error error_from_response(const std::string& what, long http_status, const std::string& body) {
  Error e;
  e.http_status = http_status;
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.value("kind", "") == "Status") {
    e.status = parse_status(doc);
  } else {
    // Not a Status (a proxy's page, an empty body): keep a bounded piece of it for the message,
    // as text that a condition or an Event can carry (a byte cut would make it unwritable).
    e.status.code = static_cast<int>(http_status);
    e.status.message = printable_text(body, 200);
  }
  e.kind = kind_for(http_status, e.status.reason);
  e.message = what + ": " + std::to_string(http_status);
  if (!e.status.reason.empty()) {
    e.message += " " + e.status.reason;
  }
  if (!e.status.message.empty()) {
    e.message += ": " + e.status.message;
  }
  return e;
}

}  // namespace tightrope::kube
