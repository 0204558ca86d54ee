// slurm.conf as an ordered model: parameters, records (NodeName, NodeSet, PartitionName, ...),
// Include lines, comments and blank lines, in file order. Parsing and rendering round-trip, so
// the operator can generate a file, merge a user's extra lines into it and check them first.
// Knows nothing of Kubernetes.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace tightrope::slurm {

struct ConfError {
  std::string source;  // "slurm.conf", "extraConf", ...
  int line = 0;        // 1-based; 0 when not about one line
  std::string message;

  std::string to_string() const;  // "extraConf line 3: ..."
};

struct ConfLine {
  enum class Kind { kBlank, kComment, kSetting, kInclude };
  Kind kind = Kind::kBlank;
  // kSetting: the line's Key=Value pairs in order. A record line (NodeName=..., NodeSet=...,
  // PartitionName=...) is a setting whose first pair names the record.
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string text;     // kComment: the whole line with its '#'; kInclude: the path
  std::string comment;  // a trailing "# ..." after a setting, kept
  int line = 0;         // where it was parsed from (0 when built)

  const std::string& key() const { return pairs.front().first; }
  const std::string& name() const { return pairs.front().second; }
  // The value of `key` on this line (case-insensitive), if present.
  std::optional<std::string> get(std::string_view key) const;
};

// Keys whose lines each describe one thing rather than set one parameter.
bool is_record_key(std::string_view key);

class SlurmConf {
 public:
  const std::vector<ConfLine>& lines() const { return lines_; }

  // The value of the last line that sets `key` (keys are case-insensitive, as in Slurm).
  std::optional<std::string> get(std::string_view key) const;
  // Sets a parameter: replaces the value on the line that has it, or appends a line.
  void set(std::string_view key, std::string value);
  // Appends a line of any kind (a record, a parameter repeated on purpose, a comment).
  void append(ConfLine line);
  void append_setting(std::vector<std::pair<std::string, std::string>> pairs);
  void append_comment(std::string text);  // "# ..." is added when missing
  void append_blank();
  // Every record line whose first key is `key` (e.g. all NodeSet lines).
  std::vector<const ConfLine*> records(std::string_view key) const;

  std::string render() const;

 private:
  std::vector<ConfLine> lines_;
};

// Parses slurm.conf text. Errors name `source` and the line.
tightrope::Result<SlurmConf, ConfError> parse_slurm_conf(std::string_view text,
                                                         const std::string& source);

// Renders one value the way Slurm reads it back: quoted when it holds blanks or '#'.
std::string quote_conf_value(std::string_view value);

// What the operator generates and a user's extra lines must leave alone.
struct OwnedConf {
  std::set<std::string> keys;  // parameters, compared case-insensitively
  // Records the operator writes, by "Key=Name" (e.g. "NodeSet=gpu", "PartitionName=gpu").
  std::set<std::string> records;
  std::string owner = "the operator";  // who owns them, for the message
};

// Every line of `extra` that sets an owned key or redefines an owned record, or includes a
// file (which could do either unseen). Empty when the lines may be appended.
std::vector<ConfError> validate_extra_conf(const SlurmConf& extra, const OwnedConf& owned);

}  // namespace tightrope::slurm
