#include "slurm/token.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tightrope::slurm {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using std::chrono::system_clock;

std::string unbase64url(std::string s) {
  for (char& c : s) {
    c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  size_t padding = 0;
  while (s.size() % 4 != 0) {
    s.push_back('=');
    ++padding;
  }
  std::string out(s.size(), '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n) - padding);  // EVP_DecodeBlock counts padding as zero bytes
  return out;
}

struct Parts {
  nlohmann::json header, claims;
  std::string signing_input, signature;
};

Parts split(const std::string& token) {
  const size_t a = token.find('.');
  const size_t b = token.find('.', a + 1);
  return Parts{nlohmann::json::parse(unbase64url(token.substr(0, a))),
               nlohmann::json::parse(unbase64url(token.substr(a + 1, b - a - 1))),
               token.substr(0, b), unbase64url(token.substr(b + 1))};
}

class TempDir : public ::testing::Test {
 protected:
  fs::path dir =
      fs::temp_directory_path() / ("tightrope-token-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return dir / name;
  }
};

TEST(MintJwt, CarriesTheClaimsAndAnHs256SignatureOverThem) {
  const auto now = system_clock::time_point(seconds(1796200000));
  const std::string token =
      mint_jwt("secret-key", JwtClaims{"slurm", now, seconds(600), "me", "id1"});
  const Parts p = split(token);
  EXPECT_EQ(p.header, (nlohmann::json{{"alg", "HS256"}, {"typ", "JWT"}}));
  EXPECT_EQ(p.claims["sun"], "slurm");
  EXPECT_EQ(p.claims["iat"], 1796200000);
  EXPECT_EQ(p.claims["nbf"], 1796200000);
  EXPECT_EQ(p.claims["exp"], 1796200600);
  EXPECT_EQ(p.claims["jti"], "id1");
  EXPECT_EQ(p.claims["iss"], "me");
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), "secret-key", 10,
       reinterpret_cast<const unsigned char*>(p.signing_input.data()), p.signing_input.size(),
       mac.data(), &len);
  EXPECT_EQ(p.signature, std::string(reinterpret_cast<char*>(mac.data()), len));
}

TEST(MintJwt, UsesNoPaddingAndOnlyUrlSafeCharacters) {
  const std::string token =
      mint_jwt(std::string(64, '\xff'), JwtClaims{"a", system_clock::now(), seconds(1), "i", ""});
  EXPECT_EQ(token.find_first_of("+/="), std::string::npos) << token;
}

TEST(MintJwt, GivesEachTokenItsOwnIdWhenNoneIsSet) {
  const JwtClaims c{"slurm", system_clock::time_point(seconds(1)), seconds(60), "i", ""};
  EXPECT_NE(split(mint_jwt("k", c)).claims["jti"], split(mint_jwt("k", c)).claims["jti"]);
}

using MintingTokenSourceTest = TempDir;

TEST_F(MintingTokenSourceTest, KeepsATokenUntilEightyPercentOfItsLifetime) {
  const auto key = write("jwt.key", "k");
  auto now = system_clock::time_point(seconds(1000));
  MintingTokenSource source(key, "slurm", seconds(100), [&now] { return now; });
  const std::string first = *source.token();
  now += seconds(79);
  EXPECT_EQ(*source.token(), first);
  now += seconds(1);
  const std::string second = *source.token();
  EXPECT_NE(second, first);
  EXPECT_EQ(split(second).claims["iat"], 1080);
}

TEST_F(MintingTokenSourceTest, MintsANewTokenAfterInvalidate) {
  const auto key = write("jwt.key", "k");
  auto now = system_clock::time_point(seconds(1000));
  MintingTokenSource source(key, "slurm", seconds(100), [&now] { return now; });
  const std::string first = *source.token();
  source.invalidate();
  EXPECT_NE(*source.token(), first);
}

TEST_F(MintingTokenSourceTest, AMissingOrEmptyKeyIsAnUnauthorizedErrorNamingTheFile) {
  MintingTokenSource missing(dir / "absent.key", "slurm");
  ASSERT_FALSE(missing.token().ok());
  EXPECT_EQ(missing.token().error().kind, ErrorKind::kUnauthorized);
  EXPECT_NE(missing.token().error().message.find("absent.key"), std::string::npos);
  MintingTokenSource empty(write("empty.key", ""), "slurm");
  ASSERT_FALSE(empty.token().ok());
  EXPECT_NE(empty.token().error().message.find("is empty"), std::string::npos);
}

TEST(TokenFromText, DropsWhitespaceAndTheScontrolPrefix) {
  EXPECT_EQ(token_from_text("SLURM_JWT=abc.def.ghi\n"), "abc.def.ghi");
  EXPECT_EQ(token_from_text("  abc.def.ghi \r\n"), "abc.def.ghi");
}

using FileTokenSourceTest = TempDir;

TEST_F(FileTokenSourceTest, ReadsTheFileAgainWhenItChanges) {
  const auto file = write("token", "SLURM_JWT=one\n");
  FileTokenSource source(file);
  EXPECT_EQ(*source.token(), "one");
  write("token", "SLURM_JWT=two-longer\n");  // a different size: seen even within one mtime tick
  EXPECT_EQ(*source.token(), "two-longer");
}

TEST_F(FileTokenSourceTest, AnEmptyOrMissingFileIsUnauthorized) {
  FileTokenSource empty(write("token", "\n"));
  ASSERT_FALSE(empty.token().ok());
  EXPECT_EQ(empty.token().error().kind, ErrorKind::kUnauthorized);
  FileTokenSource missing(dir / "nothing");
  ASSERT_FALSE(missing.token().ok());
  EXPECT_NE(missing.token().error().message.find("nothing"), std::string::npos);
}

TEST(VerifyJwt, ReadsTheClaimsOfATokenSignedWithTheKey) {
  const auto at = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  const std::string token = mint_jwt("key", {"alice", at, std::chrono::seconds(900), "t", "id"});
  const auto verified = verify_jwt("key", token);
  ASSERT_TRUE(verified);
  EXPECT_EQ(verified->user, "alice");
  EXPECT_EQ(verified->issued_at, at);
  EXPECT_EQ(verified->expires_at, at + std::chrono::seconds(900));
}

TEST(VerifyJwt, RefusesAnotherKeyATamperedBodyAndGarbage) {
  const std::string token = mint_jwt(
      "key", {"alice", std::chrono::system_clock::now(), std::chrono::seconds(60), "t", ""});
  EXPECT_FALSE(verify_jwt("other", token));
  std::string tampered = token;
  tampered[token.find('.') + 2] ^= 1;
  EXPECT_FALSE(verify_jwt("key", tampered));
  EXPECT_FALSE(verify_jwt("key", "not-a-token"));
  EXPECT_FALSE(verify_jwt("", token));
}

TEST(MintingTokenSource, MintsFromAKeyLoaderAndNamesItWhenItFails) {
  std::string key = "k1";
  MintingTokenSource source([&]() -> Result<std::string> { return key; }, "secret ns/jwt", "slurm");
  ASSERT_TRUE(source.token());
  EXPECT_TRUE(verify_jwt("k1", *source.token()));
  key.clear();
  source.invalidate();
  ASSERT_FALSE(source.token());
  EXPECT_NE(source.token().error().message.find("secret ns/jwt is empty"), std::string::npos);
}

}  // namespace
}  // namespace tightrope::slurm
