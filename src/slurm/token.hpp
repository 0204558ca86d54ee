// Where the Slurm client's JWT comes from: minted here from the cluster's HS256 key (as
// slurmctld's auth/jwt verifies it), or read from a file another component keeps fresh.
// Tokens are secrets: nothing here logs one, and errors name files, never contents.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "slurm/error.hpp"

namespace tightrope::slurm {

using Clock = std::function<std::chrono::system_clock::time_point()>;

struct JwtClaims {
  std::string user;  // `sun`: the Slurm user name the token speaks for
  std::chrono::system_clock::time_point issued_at;
  std::chrono::seconds lifetime{3600};
  std::string issuer = "tightrope";
  std::string id;  // `jti`; random when empty
};

// An HS256 JWT with the claims sun, iat, nbf, exp, jti and iss, signed with the raw key bytes.
std::string mint_jwt(const std::string& key, const JwtClaims& claims);

// The claims of `token` when it is an HS256 JWT signed with `key` (a token signed with another
// key, or malformed, gives nothing). Expiry is not checked: the caller compares times.
struct VerifiedJwt {
  std::string user;
  std::chrono::system_clock::time_point issued_at;
  std::chrono::system_clock::time_point expires_at;
};
std::optional<VerifiedJwt> verify_jwt(const std::string& key, const std::string& token);

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // The token to send now.
  virtual Result<std::string> token() = 0;
  // The server refused the last token: mint or read a new one before the next call.
  virtual void invalidate() = 0;
};

// Where a minting source gets its key: read at each mint, so a rotated key takes effect with
// the next token. An error names where the key should have come from, never its bytes.
using KeyLoader = std::function<Result<std::string>()>;

// Mints tokens from a key and mints a new one after 80 % of each token's lifetime.
class MintingTokenSource : public TokenSource {
 public:
  MintingTokenSource(const std::filesystem::path& key_file, std::string user,
                     std::chrono::seconds lifetime = std::chrono::hours(1),
                     Clock clock = std::chrono::system_clock::now);
  MintingTokenSource(KeyLoader key, std::string key_name, std::string user,
                     std::chrono::seconds lifetime = std::chrono::hours(1),
                     Clock clock = std::chrono::system_clock::now);
  Result<std::string> token() override;
  void invalidate() override;

 private:
  KeyLoader key_;
  std::string key_name_;
  std::string user_;
  std::chrono::seconds lifetime_;
  Clock clock_;
  std::mutex mu_;
  std::string token_;
  std::chrono::system_clock::time_point refresh_at_;
};

// Reads a token from a file (a Kubernetes Secret mount, `scontrol token` output): surrounding
// whitespace and a `SLURM_JWT=` prefix are dropped; the file is read again when it changes.
class FileTokenSource : public TokenSource {
 public:
  explicit FileTokenSource(std::filesystem::path file);
  Result<std::string> token() override;
  void invalidate() override;

 private:
  std::filesystem::path file_;
  std::mutex mu_;
  std::string token_;
  std::filesystem::file_time_type seen_mtime_{};
  std::uintmax_t seen_size_ = 0;
};

// The token in a file's text, as FileTokenSource reads it.
std::string token_from_text(std::string text);

}  // namespace tightrope::slurm
