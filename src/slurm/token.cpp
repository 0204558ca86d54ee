#include "slurm/token.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tightrope::slurm {
namespace {

std::string base64url(const unsigned char* data, size_t size) {
  std::string out(4 * ((size + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') {
    out.pop_back();
  }
  for (char& c : out) {
    c = c == '+' ? '-' : c == '/' ? '_' : c;
  }
  return out;
}

std::string base64url(const std::string& s) {
  return base64url(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

std::string random_id() {
  std::array<unsigned char, 16> bytes{};
  RAND_bytes(bytes.data(), static_cast<int>(bytes.size()));
  return base64url(bytes.data(), bytes.size());
}

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(Error{ErrorKind::kUnauthorized, 0, "cannot read " + path.string(), {}});
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<std::string> unbase64url(std::string_view in) {
  std::string b64(in);
  for (char& c : b64) {
    c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  while (b64.size() % 4 != 0) {
    b64.push_back('=');
  }
  std::string out(b64.size() / 4 * 3 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) {
    return std::nullopt;
  }
  auto size = static_cast<size_t>(n);
  for (size_t i = b64.size(); i > 0 && b64[i - 1] == '='; --i) {
    --size;  // EVP_DecodeBlock counts the padding as zero bytes
  }
  out.resize(size);
  return out;
}

std::string hs256(const std::string& key, std::string_view input) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &mac_len);
  return base64url(mac.data(), mac_len);
}

}  // namespace

std::optional<VerifiedJwt> verify_jwt(const std::string& key, const std::string& token) {
  const size_t a = token.find('.');
  const size_t b = a == std::string::npos ? a : token.find('.', a + 1);
  if (b == std::string::npos || key.empty()) {
    return std::nullopt;
  }
  const std::string expected = hs256(key, std::string_view(token).substr(0, b));
  const std::string_view given = std::string_view(token).substr(b + 1);
  if (expected.size() != given.size() ||
      CRYPTO_memcmp(expected.data(), given.data(), expected.size()) != 0) {
    return std::nullopt;
  }
  const auto header = unbase64url(std::string_view(token).substr(0, a));
  const auto body = unbase64url(std::string_view(token).substr(a + 1, b - a - 1));
  if (!header || !body) {
    return std::nullopt;
  }
  const auto h = nlohmann::json::parse(*header, nullptr, false);
  const auto c = nlohmann::json::parse(*body, nullptr, false);
  if (!h.is_object() || h.value("alg", "") != "HS256" || !c.is_object() ||
      !c.value("sun", nlohmann::json()).is_string() ||
      !c.value("iat", nlohmann::json()).is_number_integer() ||
      !c.value("exp", nlohmann::json()).is_number_integer()) {
    return std::nullopt;
  }
  using std::chrono::seconds;
  using std::chrono::system_clock;
  return VerifiedJwt{c["sun"].get<std::string>(),
                     system_clock::time_point(seconds(c["iat"].get<int64_t>())),
                     system_clock::time_point(seconds(c["exp"].get<int64_t>()))};
}

std::string mint_jwt(const std::string& key, const JwtClaims& claims) {
  const auto iat =
      std::chrono::duration_cast<std::chrono::seconds>(claims.issued_at.time_since_epoch()).count();
  const nlohmann::json header = {{"alg", "HS256"}, {"typ", "JWT"}};
  const nlohmann::json body = {{"sun", claims.user},
                               {"iat", iat},
                               {"nbf", iat},
                               {"exp", iat + claims.lifetime.count()},
                               {"jti", claims.id.empty() ? random_id() : claims.id},
                               {"iss", claims.issuer}};
  const std::string signing_input = base64url(header.dump()) + "." + base64url(body.dump());
  return signing_input + "." + hs256(key, signing_input);
}

MintingTokenSource::MintingTokenSource(const std::filesystem::path& key_file, std::string user,
                                       std::chrono::seconds lifetime, Clock clock)
    : MintingTokenSource([key_file] { return read_file(key_file); }, key_file.string(),
                         std::move(user), lifetime, std::move(clock)) {}

MintingTokenSource::MintingTokenSource(KeyLoader key, std::string key_name, std::string user,
                                       std::chrono::seconds lifetime, Clock clock)
    : key_(std::move(key)),
      key_name_(std::move(key_name)),
      user_(std::move(user)),
      lifetime_(lifetime),
      clock_(std::move(clock)) {}

Result<std::string> MintingTokenSource::token() {
  std::lock_guard lock(mu_);
  const auto now = clock_();
  if (token_.empty() || now >= refresh_at_) {
    // The key is read at each mint: a rotated Secret takes effect with the next token.
    auto key = key_();
    if (!key) {
      return fail(Error{
          ErrorKind::kUnauthorized, 0, "cannot mint a Slurm token: " + key.error().message, {}});
    }
    if (key->empty()) {
      return fail(Error{ErrorKind::kUnauthorized,
                        0,
                        "cannot mint a Slurm token: " + key_name_ + " is empty",
                        {}});
    }
    token_ = mint_jwt(*key, JwtClaims{user_, now, lifetime_, "tightrope", {}});
    refresh_at_ = now + lifetime_ * 8 / 10;
  }
  return token_;
}

void MintingTokenSource::invalidate() {
  std::lock_guard lock(mu_);
  token_.clear();
}

std::string token_from_text(std::string text) {
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!text.empty() && blank(text.back())) {
    text.pop_back();
  }
  size_t start = 0;
  while (start < text.size() && blank(text[start])) {
    ++start;
  }
  text.erase(0, start);
  constexpr std::string_view kPrefix = "SLURM_JWT=";
  if (text.rfind(kPrefix, 0) == 0) {
    text.erase(0, kPrefix.size());
  }
  return text;
}

FileTokenSource::FileTokenSource(std::filesystem::path file) : file_(std::move(file)) {}

Result<std::string> FileTokenSource::token() {
  std::lock_guard lock(mu_);
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(file_, ec);
  const auto size = ec ? 0 : std::filesystem::file_size(file_, ec);
  if (ec) {
    return fail(Error{ErrorKind::kUnauthorized,
                      0,
                      "cannot read the Slurm token file " + file_.string() + ": " + ec.message(),
                      {}});
  }
  if (token_.empty() || mtime != seen_mtime_ || size != seen_size_) {
    auto text = read_file(file_);
    if (!text) {
      return fail(text.error());
    }
    token_ = token_from_text(std::move(*text));
    seen_mtime_ = mtime;
    seen_size_ = size;
    if (token_.empty()) {
      return fail(Error{
          ErrorKind::kUnauthorized, 0, "the Slurm token file " + file_.string() + " is empty", {}});
    }
  }
  return token_;
}

void FileTokenSource::invalidate() {
  std::lock_guard lock(mu_);
  token_.clear();
}

}  // namespace tightrope::slurm
