#include "slurm/client.hpp"

#include <algorithm>
#include <thread>

#include "base/text.hpp"

namespace tightrope::slurm {
namespace {

using nlohmann::json;

constexpr int kAlreadyDone = 2021;  // ESLURM_ALREADY_DONE: the job had finished already

int64_t epoch_seconds(Time t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

Error unavailable(const std::string& message) {
  return Error{ErrorKind::kUnavailable, 0, message, {}};
}

}  // namespace

Result<Answer> read_answer(const std::string& what, long status, std::string_view body,
                           const std::vector<std::string>* item_fields) {
  Answer answer{status, json()};
  if (answer.status == 304) {
    return answer;
  }
  // Keys at depth 3 are those of a list's items ({"nodes": [{"name": ...}]}). Parsing the whole
  // of a thousand-node answer would cost tens of MB for a moment, for fields nobody reads.
  const json::parser_callback_t keep = [item_fields](int depth, json::parse_event_t event,
                                                     json& parsed) {
    return event != json::parse_event_t::key || depth != 3 ||
           std::find(item_fields->begin(), item_fields->end(), parsed.get<std::string>()) !=
               item_fields->end();
  };
  const auto parse = [&](std::string_view text) {
    return item_fields == nullptr ? json::parse(text, nullptr, /*allow_exceptions=*/false)
                                  : json::parse(text, keep, /*allow_exceptions=*/false);
  };
  if (json_nested_deeper_than(body, kMaxAnswerDepth)) {
    return fail(Error{
        ErrorKind::kProtocol,
        answer.status,
        what + ": an answer nested deeper than " + std::to_string(kMaxAnswerDepth) + " levels",
        {}});
  }
  if (!body.empty()) {
    answer.doc = parse(body);
  }
  if (answer.doc.is_discarded() && utf8_error_at(body) != std::string_view::npos) {
    // Slurm passes on the bytes it was given: one reason typed in Latin-1 would make the whole
    // list unreadable, and the operator blind to every node of the cluster. Such bytes become
    // U+FFFD; the parser refuses them, so this costs nothing while the answer is UTF-8.
    answer.doc = parse(valid_utf8(body));
  }
  if (answer.doc.is_discarded()) {
    if (answer.status >= 200 && answer.status < 300) {
      return fail(Error{ErrorKind::kProtocol, answer.status, what + ": answer is not JSON", {}});
    }
    return fail(classify(what, answer.status, {}, std::string(body)));
  }
  auto entries = decode_errors(answer.doc);
  if (answer.status >= 200 && answer.status < 300 && entries.empty()) {
    return answer;
  }
  return fail(classify(what, answer.status, std::move(entries)));
}

Result<Done> Client::done(const Result<Answer>& answer) {
  if (!answer) {
    return fail(answer.error());
  }
  return Done{};
}

Client::Client(ClientOptions options, std::shared_ptr<TokenSource> tokens)
    : options_(std::move(options)), tokens_(std::move(tokens)), http_(options_.tls) {
  while (!options_.url.empty() && options_.url.back() == '/') {
    options_.url.pop_back();
  }
}

std::string Client::api(const std::string& path) const {
  return "/slurm/" + std::string(options_.version->name) + path;
}

Result<Answer> Client::attempt(const std::string& method, const std::string& path,
                               const std::string& body, const std::vector<std::string>* item_fields,
                               std::chrono::milliseconds timeout) {
  auto token = tokens_->token();
  if (!token) {
    return fail(token.error());
  }
  http::Request req;
  req.method = method;
  req.url = options_.url + path;
  req.body = body;
  req.timeout = std::max(options_.timeout, timeout);
  req.max_body_bytes = options_.max_answer_bytes;
  req.headers = {{"X-SLURM-USER-TOKEN", *token}, {"Accept", "application/json"}};
  if (!body.empty()) {
    req.headers.emplace_back("Content-Type", "application/json");
  }
  if (!options_.user_name.empty()) {
    req.headers.emplace_back("X-SLURM-USER-NAME", options_.user_name);
  }
  req.headers.insert(req.headers.end(), options_.headers.begin(), options_.headers.end());
  auto sent = http_.send(req);
  if (!sent && sent.error().kind == http::TransportError::Kind::kTooLarge) {
    // Not retried: the same question would bring the same answer.
    return fail(Error{ErrorKind::kProtocol, 0, sent.error().message, {}});
  }
  if (!sent) {
    Error e = unavailable(sent.error().message);
    // Remember whether the request can have reached the server (see call()).
    e.http_status = sent.error().kind == http::TransportError::Kind::kConnect ? -1 : 0;
    return fail(std::move(e));
  }
  return read_answer(method + " " + path, sent->status, sent->body, item_fields);
}

Result<Answer> Client::call(const std::string& method, const std::string& path,
                            const std::optional<json>& body, Safety safety,
                            const std::vector<std::string>* item_fields,
                            std::chrono::milliseconds timeout) {
  const std::string payload = body ? body->dump() : std::string{};
  auto delay = options_.backoff_initial;
  bool reauthorized = false;
  for (int n = 1;; ++n) {
    auto answer = attempt(method, path, payload, item_fields, timeout);
    if (options_.on_attempt) {
      options_.on_attempt(method, answer ? nullptr : &answer.error());
    }
    if (answer) {
      return answer;
    }
    const Error& e = answer.error();
    if (e.kind == ErrorKind::kUnauthorized && !reauthorized) {
      // An expired or rotated token: one more try with a fresh one.
      tokens_->invalidate();
      reauthorized = true;
      continue;
    }
    // Retry only what cannot have half-happened: a request that never reached slurmrestd
    // (http_status -1), or a timed-out one that is safe to repeat.
    const bool never_sent = e.http_status == -1;
    const bool repeatable = safety == Safety::kIdempotent && e.http_status == 0;
    if (e.kind != ErrorKind::kUnavailable || !(never_sent || repeatable) ||
        n >= options_.max_attempts) {
      Error out = e;
      out.http_status = std::max(out.http_status, 0L);
      return fail(std::move(out));
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, options_.backoff_max);
  }
}

Result<Conditional<NodeList>> Client::list_nodes(const NodeQuery& query) {
  std::string path = api("/nodes");
  std::string sep = "?";
  if (query.changed_since) {
    path += sep + "update_time=" + std::to_string(epoch_seconds(*query.changed_since));
    sep = "&";
  }
  // DETAIL: without it slurmctld leaves gres_used empty (as scontrol does without -d).
  path += sep + "flags=DETAIL";
  if (query.include_future) {
    path += "&flags=FUTURE";
  }
  const std::vector<std::string> fields = node_fields(*options_.version);
  auto answer = call("GET", path, std::nullopt, Safety::kIdempotent, &fields, query.timeout);
  if (!answer) {
    return fail(answer.error());
  }
  if (answer->status == 304) {
    return Conditional<NodeList>{false, {}};
  }
  auto list = decode_nodes(answer->doc, *options_.version);
  if (!list) {
    return fail(list.error());
  }
  return Conditional<NodeList>{true, std::move(*list)};
}

namespace {

// The node `name` of an answer's list (slurmrestd's /node/{name} lists it alone).
std::optional<Node> take_node(std::vector<Node>& nodes, const std::string& name) {
  for (auto& node : nodes) {
    if (node.name == name) {
      return std::move(node);
    }
  }
  return std::nullopt;
}

}  // namespace

Result<Node> Client::get_node(const std::string& name) {
  auto list = list_nodes(NodeQuery{std::nullopt, true});
  if (!list) {
    return fail(list.error());
  }
  if (auto node = take_node(list->list.nodes, name)) {
    return std::move(*node);
  }
  return fail(Error{ErrorKind::kNotFound, 200, "GET " + api("/nodes") + ": no node " + name, {}});
}

Result<Node> Client::get_node_state(const std::string& name) {
  const std::vector<std::string> fields = node_fields(*options_.version);
  auto answer = call("GET", api("/node/" + name), std::nullopt, Safety::kIdempotent, &fields);
  if (!answer) {
    return fail(answer.error());
  }
  auto list = decode_nodes(answer->doc, *options_.version);
  if (!list) {
    return fail(list.error());
  }
  if (auto node = take_node(list->nodes, name)) {
    return std::move(*node);
  }
  return fail(Error{ErrorKind::kNotFound, answer->status, "no node " + name, {}});
}

Result<Done> Client::update_node(const std::string& name, const NodeUpdate& update) {
  return done(call("POST", api("/node/" + name), encode_node_update(update, *options_.version),
                   Safety::kIdempotent));
}

Result<Done> Client::drain(const std::string& name, const std::string& reason) {
  NodeUpdate u;
  u.state = {"DRAIN"};
  u.reason = reason;
  return update_node(name, u);
}

Result<Done> Client::resume(const std::string& name) {
  NodeUpdate u;
  u.state = {"RESUME"};
  return update_node(name, u);
}

Result<Done> Client::undrain(const std::string& name) {
  NodeUpdate u;
  u.state = {"UNDRAIN"};
  return update_node(name, u);
}

Result<Done> Client::set_down(const std::string& name, const std::string& reason) {
  NodeUpdate u;
  u.state = {"DOWN"};
  u.reason = reason;
  return update_node(name, u);
}

Result<Done> Client::create_node(const std::string& node_conf) {
  // Not repeated on a timeout: a second create of the same name fails and hides the first.
  return done(call("POST", api("/new/node"), json{{"node_conf", node_conf}}, Safety::kOnce));
}

Result<Done> Client::delete_node(const std::string& name) {
  return done(call("DELETE", api("/node/" + name), std::nullopt, Safety::kIdempotent));
}

Result<Conditional<JobList>> Client::list_jobs(std::optional<Time> changed_since,
                                               std::chrono::milliseconds timeout) {
  std::string path = api("/jobs");
  if (changed_since) {
    path += "?update_time=" + std::to_string(epoch_seconds(*changed_since));
  }
  const std::vector<std::string> fields = job_fields(*options_.version);
  auto answer = call("GET", path, std::nullopt, Safety::kIdempotent, &fields, timeout);
  if (!answer) {
    return fail(answer.error());
  }
  auto list = decode_jobs(answer->doc, *options_.version);
  if (!list) {
    return fail(list.error());
  }
  const bool unchanged = changed_since && list->jobs.empty() && !list->last_update;
  return Conditional<JobList>{!unchanged, std::move(*list)};
}

Result<Job> Client::get_job(int64_t id) {
  auto answer = call("GET", api("/job/" + std::to_string(id)), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  auto list = decode_jobs(answer->doc, *options_.version);
  if (!list) {
    return fail(list.error());
  }
  if (list->jobs.empty()) {
    return fail(Error{ErrorKind::kNotFound, answer->status, "no job " + std::to_string(id), {}});
  }
  return std::move(list->jobs.front());
}

Result<int64_t> Client::submitted(const Result<Answer>& answer) {
  if (!answer) {
    return fail(answer.error());
  }
  const json* id = answer->doc.contains("job_id") ? &answer->doc["job_id"] : nullptr;
  if (id == nullptr || !id->is_number_integer()) {
    return fail(Error{ErrorKind::kProtocol, answer->status, "job/submit: no job_id in answer", {}});
  }
  return id->get<int64_t>();
}

Result<int64_t> Client::submit_job(const JobSubmission& job) {
  return submitted(call("POST", api("/job/submit"), encode_job_submission(job, *options_.version),
                        Safety::kOnce));
}

Result<int64_t> Client::submit_external_job(const ExternalJob& job) {
  return submitted(call("POST", api("/job/submit"),
                        json{{"job", encode_external_job(job, *options_.version)}}, Safety::kOnce));
}

Result<Done> Client::update_external_job(int64_t id, const ExternalJob& job) {
  json desc = encode_external_job(job, *options_.version);
  desc.erase("flags");
  return update_job(id, desc);
}

Result<std::vector<JobNodeAllocation>> Client::job_allocation(int64_t id) {
  auto answer = call("GET", api("/job/" + std::to_string(id)), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  const json* jobs = answer->doc.contains("jobs") ? &answer->doc["jobs"] : nullptr;
  if (jobs == nullptr || !jobs->is_array() || jobs->empty()) {
    return fail(Error{ErrorKind::kNotFound, answer->status, "no job " + std::to_string(id), {}});
  }
  return decode_job_allocation(jobs->front(), *options_.version);
}

Result<Done> Client::update_job(int64_t id, const json& changes) {
  return done(call("POST", api("/job/" + std::to_string(id)), changes, Safety::kIdempotent));
}

Result<Done> Client::cancel_job(int64_t id) {
  const std::string path = api("/job/" + std::to_string(id));
  auto answer = call("DELETE", path, std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  // Per-job outcomes come in `status[]`, with HTTP 200 even for an unknown job.
  if (const auto it = answer->doc.find("status"); it != answer->doc.end() && it->is_array()) {
    for (const auto& s : *it) {
      const int code = s.value("/error/code"_json_pointer, 0);
      if (code == 0 || code == kAlreadyDone) {
        continue;
      }
      const std::string text = s.value("/error/string"_json_pointer, std::string("error"));
      ApiErrorEntry entry{code, text, "cancel job " + std::to_string(id), "status"};
      return fail(classify("DELETE " + path, answer->status, {entry}));
    }
  }
  return Done{};
}

Result<std::vector<Partition>> Client::list_partitions() {
  auto answer = call("GET", api("/partitions"), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  return decode_partitions(answer->doc, *options_.version);
}

Result<std::vector<Reservation>> Client::list_reservations() {
  auto answer = call("GET", api("/reservations"), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  return decode_reservations(answer->doc, *options_.version);
}

Result<Reservation> Client::get_reservation(const std::string& name) {
  auto answer = call("GET", api("/reservation/" + name), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  auto list = decode_reservations(answer->doc, *options_.version);
  if (!list) {
    return fail(list.error());
  }
  for (auto& r : *list) {
    if (r.name == name) {
      return std::move(r);
    }
  }
  return fail(Error{ErrorKind::kNotFound, answer->status, "no reservation " + name, {}});
}

Result<Done> Client::create_reservation(const Reservation& reservation) {
  return done(call("POST", api("/reservation"), encode_reservation(reservation, *options_.version),
                   Safety::kOnce));
}

Result<Done> Client::update_reservation(const std::string& name, const ReservationUpdate& update) {
  // Only the changed fields: repeating a start time that has passed is refused.
  const json body = {
      {"reservations", json::array({encode_reservation_update(name, update, *options_.version)})}};
  return done(call("POST", api("/reservations"), body, Safety::kIdempotent));
}

Result<Done> Client::delete_reservation(const std::string& name) {
  return done(call("DELETE", api("/reservation/" + name), std::nullopt, Safety::kIdempotent));
}

Result<Ping> Client::ping() {
  auto answer = call("GET", api("/ping"), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  return decode_ping(answer->doc, *options_.version);
}

Result<Done> Client::accounting_diag() {
  return done(call("GET", "/slurmdb/" + std::string(options_.version->name) + "/diag", std::nullopt,
                   Safety::kIdempotent));
}

Result<Diag> Client::diag() {
  auto answer = call("GET", api("/diag"), std::nullopt, Safety::kIdempotent);
  if (!answer) {
    return fail(answer.error());
  }
  return decode_diag(answer->doc, *options_.version);
}

Result<Done> Client::reconfigure() {
  return done(call("GET", api("/reconfigure"), std::nullopt, Safety::kIdempotent));
}

}  // namespace tightrope::slurm
