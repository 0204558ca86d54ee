#include "kube/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace tightrope::kube {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kLabel = "kubeconfig";
constexpr const char* kCaPem =
    "-----BEGIN CERTIFICATE-----\nMIIBcafake\n-----END CERTIFICATE-----\n";
constexpr const char* kCertPem =
    "-----BEGIN CERTIFICATE-----\nMIIBcertfake\n-----END CERTIFICATE-----\n";
constexpr const char* kKeyPem =
    "-----BEGIN PRIVATE KEY-----\nMIIEkeyfake\n-----END PRIVATE KEY-----\n";
constexpr const char* kSecret = "s3cr3t-t0ken-value";

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// A kubeconfig whose current context "dev" joins the cluster "local" and the user "admin". The
// arguments are the bodies of `cluster:` and `user:`, one "key: value" per line.
std::string kubeconfig(const std::string& cluster, const std::string& user) {
  auto indent = [](const std::string& body) {
    std::istringstream lines(body);
    std::string out;
    for (std::string line; std::getline(lines, line);) {
      out += "    " + line + "\n";
    }
    return out;
  };
  return "apiVersion: v1\n"
         "kind: Config\n"
         "current-context: dev\n"
         "clusters:\n"
         "- name: local\n"
         "  cluster:\n" +
         indent(cluster) +
         "contexts:\n"
         "- name: dev\n"
         "  context:\n"
         "    cluster: local\n"
         "    user: admin\n"
         "    namespace: slurm\n"
         "users:\n"
         "- name: admin\n"
         "  user:\n" +
         indent(user);
}

std::string with_user(const std::string& user) {
  return kubeconfig("server: https://10.0.0.1:6443", user);
}

std::string with_cluster(const std::string& cluster) {
  return kubeconfig(cluster, "token: abc");
}

constexpr const char* kTwoContexts = R"(current-context: dev
clusters:
- name: local
  cluster: {server: "https://local:6443"}
- name: remote
  cluster: {server: "https://remote.example:443/"}
contexts:
- name: dev
  context: {cluster: local, user: admin, namespace: slurm}
- name: prod
  context: {cluster: remote, user: admin}
users:
- name: admin
  user: {token: abc}
)";

Result<Config, ConfigError> parse(const std::string& text, const std::string& base_dir = "/base",
                                  const std::string& context = "") {
  return parse_kubeconfig(text, kLabel, base_dir, context);
}

Config parsed(const std::string& text, const std::string& base_dir = "/base") {
  auto config = parse(text, base_dir);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().to_string());
  return config.ok() ? *config : Config{};
}

ConfigError error_of(const Result<Config, ConfigError>& config) {
  EXPECT_FALSE(config.ok()) << "expected an error, got a config for " << config->server;
  return config.ok() ? ConfigError{} : config.error();
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/tightrope-kube-config-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

using Kubeconfig = TempDir;
using KubeconfigErrors = TempDir;
using LoadDefault = TempDir;
using InCluster = TempDir;
using ReadTokenFile = TempDir;

// --- What a kubeconfig yields ---

TEST(KubeconfigText, UsesTheCurrentContext) {
  const Config config = parsed(kTwoContexts);
  EXPECT_EQ(config.context, "dev");
  EXPECT_EQ(config.server, "https://local:6443");
}

TEST(KubeconfigText, UsesTheContextTheCallerNames) {
  auto config = parse(kTwoContexts, "/base", "prod");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->context, "prod");
  EXPECT_EQ(config->server, "https://remote.example:443");
}

TEST(KubeconfigText, TakesTheNamespaceFromTheContext) {
  EXPECT_EQ(parsed(kTwoContexts).namespace_name, "slurm");
}

TEST(KubeconfigText, DefaultsTheNamespaceToDefault) {
  auto config = parse(kTwoContexts, "/base", "prod");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->namespace_name, "default");
}

TEST(KubeconfigText, DropsTrailingSlashesFromTheServer) {
  EXPECT_EQ(parsed(with_cluster("server: https://10.0.0.1:6443//")).server,
            "https://10.0.0.1:6443");
}

TEST(KubeconfigText, KeepsAPathPrefixOfTheServer) {
  EXPECT_EQ(parsed(with_cluster("server: https://rancher/k8s/clusters/c-1/")).server,
            "https://rancher/k8s/clusters/c-1");
}

TEST(KubeconfigText, AssumesHttpsForAServerWithoutScheme) {
  EXPECT_EQ(parsed(with_cluster("server: 10.0.0.1:6443")).server, "https://10.0.0.1:6443");
}

TEST(KubeconfigText, DecodesCertificateAuthorityData) {
  const Config config =
      parsed(with_cluster("server: https://a:6443\ncertificate-authority-data: " + base64(kCaPem)));
  EXPECT_EQ(config.ca_pem, kCaPem);
  EXPECT_FALSE(config.insecure_skip_tls_verify);
}

TEST(KubeconfigText, DecodesBase64SplitAcrossLines) {
  const std::string data = base64(kCaPem);
  const std::string folded = data.substr(0, 20) + "\n      " + data.substr(20);
  const Config config =
      parsed(with_cluster("server: https://a:6443\ncertificate-authority-data: |\n  " + folded));
  EXPECT_EQ(config.ca_pem, kCaPem);
}

TEST(KubeconfigText, ReadsInsecureSkipTlsVerify) {
  EXPECT_TRUE(parsed(with_cluster("server: https://a:6443\ninsecure-skip-tls-verify: true"))
                  .insecure_skip_tls_verify);
}

TEST(KubeconfigText, DecodesClientCertificateAndKeyData) {
  const Config config = parsed(with_user("client-certificate-data: " + base64(kCertPem) +
                                         "\nclient-key-data: " + base64(kKeyPem)));
  EXPECT_EQ(config.client_cert_pem, kCertPem);
  EXPECT_EQ(config.client_key_pem, kKeyPem);
}

TEST(KubeconfigText, ReadsAnInlineToken) {
  const Config config = parsed(with_user(std::string("token: ") + kSecret));
  EXPECT_EQ(config.token, kSecret);
  EXPECT_EQ(config.token_file, "");
}

TEST(KubeconfigText, AllowsAContextWithoutAUser) {
  const Config config = parsed(R"(current-context: anon
clusters: [{name: c, cluster: {server: "https://c:6443"}}]
contexts: [{name: anon, context: {cluster: c}}]
)");
  EXPECT_EQ(config.server, "https://c:6443");
  EXPECT_EQ(config.token, "");
  EXPECT_EQ(config.client_cert_pem, "");
}

TEST(KubeconfigText, IgnoresAnExecUserThatTheContextDoesNotUse) {
  const std::string text = with_user("token: abc") +
                           "- name: gke\n"
                           "  user:\n"
                           "    exec: {command: gke-gcloud-auth-plugin}\n";
  EXPECT_EQ(parsed(text).token, "abc");
}

TEST_F(Kubeconfig, ReadsTheCertificateAuthorityFile) {
  const std::string ca = write("ca.crt", kCaPem);
  const Config config =
      parsed(with_cluster("server: https://a:6443\ncertificate-authority: " + ca));
  EXPECT_EQ(config.ca_pem, kCaPem);
}

TEST_F(Kubeconfig, ReadsClientCertificateAndKeyFiles) {
  const std::string cert = write("client.crt", kCertPem);
  const std::string key = write("client.key", kKeyPem);
  const Config config = parsed(with_user("client-certificate: " + cert + "\nclient-key: " + key));
  EXPECT_EQ(config.client_cert_pem, kCertPem);
  EXPECT_EQ(config.client_key_pem, kKeyPem);
}

TEST_F(Kubeconfig, KeepsTheTokenFileWithoutReadingItIntoToken) {
  const std::string token = write("token", std::string(kSecret) + "\n");
  const Config config = parsed(with_user("tokenFile: " + token));
  EXPECT_EQ(config.token_file, token);
  EXPECT_EQ(config.token, "");
}

TEST_F(Kubeconfig, ResolvesRelativePathsAgainstTheKubeconfigDirectory) {
  write("kube/pki/ca.crt", kCaPem);
  write("kube/pki/client.crt", kCertPem);
  write("kube/pki/client.key", kKeyPem);
  write("kube/token", kSecret);
  const std::string file =
      write("kube/config", kubeconfig("server: https://a:6443\ncertificate-authority: pki/ca.crt",
                                      "client-certificate: pki/client.crt\n"
                                      "client-key: ./pki/client.key\n"
                                      "tokenFile: token"));
  auto config = load_kubeconfig(file);
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->client_cert_pem, kCertPem);
  EXPECT_EQ(config->client_key_pem, kKeyPem);
  EXPECT_EQ(fs::path(config->token_file), fs::path(path("kube")) / "token");
}

TEST_F(Kubeconfig, LoadsTheContextTheCallerNamesFromAFile) {
  const std::string file = write("config", kTwoContexts);
  auto config = load_kubeconfig(file, "prod");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->context, "prod");
}

// --- What is refused, and how the error says where ---

TEST(KubeconfigTextErrors, FormatFileFieldAndMessage) {
  EXPECT_EQ((ConfigError{"f", "a.b", "is bad"}).to_string(), "f: a.b: is bad");
  EXPECT_EQ((ConfigError{"f", "", "is bad"}).to_string(), "f: is bad");
  EXPECT_EQ((ConfigError{"", "ENV", "is bad"}).to_string(), "ENV: is bad");
}

TEST(KubeconfigTextErrors, NameTheMissingCurrentContext) {
  const ConfigError e = error_of(parse("clusters: []\n"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "current-context");
  EXPECT_THAT(e.message, HasSubstr("not set"));
}

TEST(KubeconfigTextErrors, NameTheMissingCurrentContextOfAnEmptyFile) {
  const ConfigError e = error_of(parse(""));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "current-context");
}

TEST(KubeconfigTextErrors, NameAContextTheCallerAskedForThatDoesNotExist) {
  const ConfigError e = error_of(parse(kTwoContexts, "/base", "staging"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "contexts");
  EXPECT_THAT(e.message, HasSubstr("\"staging\""));
}

TEST(KubeconfigTextErrors, NameACurrentContextThatDoesNotExist) {
  std::string text = kTwoContexts;
  text.replace(0, text.find('\n'), "current-context: gone");
  const ConfigError e = error_of(parse(text));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "current-context");
  EXPECT_THAT(e.message, HasSubstr("\"gone\""));
}

TEST(KubeconfigTextErrors, NameAContextReferringToAMissingCluster) {
  const ConfigError e = error_of(parse(R"(current-context: dev
contexts: [{name: dev, context: {cluster: nowhere, user: admin}}]
users: [{name: admin, user: {token: abc}}]
)"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "contexts[dev].context.cluster");
  EXPECT_THAT(e.message, HasSubstr("\"nowhere\""));
}

TEST(KubeconfigTextErrors, NameAContextReferringToAMissingUser) {
  const ConfigError e = error_of(parse(R"(current-context: dev
clusters: [{name: c, cluster: {server: "https://c:6443"}}]
contexts: [{name: dev, context: {cluster: c, user: nobody}}]
)"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "contexts[dev].context.user");
  EXPECT_THAT(e.message, HasSubstr("\"nobody\""));
}

TEST(KubeconfigTextErrors, NameAContextWithoutACluster) {
  const ConfigError e =
      error_of(parse("current-context: dev\ncontexts: [{name: dev, context: {}}]"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "contexts[dev].context.cluster");
}

TEST(KubeconfigTextErrors, NameAClusterWithoutServer) {
  const ConfigError e = error_of(parse(with_cluster("insecure-skip-tls-verify: true")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters[local].cluster.server");
  EXPECT_THAT(e.message, HasSubstr("not set"));
}

TEST(KubeconfigTextErrors, NameAServerWithAnUnsupportedScheme) {
  const ConfigError e = error_of(parse(with_cluster("server: unix:///run/k8s.sock")));
  EXPECT_EQ(e.field, "clusters[local].cluster.server");
  EXPECT_THAT(e.message, HasSubstr("\"unix\""));
}

TEST(KubeconfigTextErrors, GiveTheLineAndColumnOfMalformedYaml) {
  const ConfigError e = error_of(parse("current-context: dev\nclusters:\n  - name: [a\n"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "");
  EXPECT_THAT(e.message, HasSubstr("malformed YAML at line"));
  EXPECT_THAT(e.message, HasSubstr("column"));
}

TEST(KubeconfigTextErrors, GiveTheLineOfATabIndentedLine) {
  const ConfigError e = error_of(parse("current-context: dev\nclusters:\n\t- name: a\n"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_THAT(e.message, HasSubstr("line 3"));
}

TEST(KubeconfigTextErrors, NeverQuoteTheBadEscapeOfAQuotedToken) {
  const ConfigError e = error_of(parse(with_user(R"(token: "abc\qdef")")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_THAT(e.message, HasSubstr("unknown escape character"));
  EXPECT_THAT(e.message, Not(HasSubstr("q")));
}

TEST(KubeconfigTextErrors, RefuseYamlNestedTooDeeply) {
  const ConfigError e = error_of(parse("current-context: [" + std::string(5000, '[')));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_THAT(e.message, HasSubstr("nested too deeply"));
}

TEST(KubeconfigTextErrors, NameAListWhereAMapIsExpected) {
  const ConfigError e = error_of(parse(R"(current-context: dev
clusters: [{name: local, cluster: [https://a:6443]}]
contexts: [{name: dev, context: {cluster: local}}]
)"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters[local].cluster");
  EXPECT_THAT(e.message, HasSubstr("expected a map, found a list"));
}

TEST(KubeconfigTextErrors, NameAMapWhereAListIsExpected) {
  const ConfigError e = error_of(parse(R"(current-context: dev
clusters: {local: {server: "https://a:6443"}}
contexts: [{name: dev, context: {cluster: local}}]
)"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters");
  EXPECT_THAT(e.message, HasSubstr("expected a list, found a map"));
}

TEST(KubeconfigTextErrors, NameAMapWhereAStringIsExpected) {
  const ConfigError e = error_of(parse(with_cluster("server: {host: a}")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters[local].cluster.server");
  EXPECT_THAT(e.message, HasSubstr("expected a string, found a map"));
}

TEST(KubeconfigTextErrors, NameAListEntryThatIsNotAMap) {
  const ConfigError e = error_of(parse("current-context: dev\ncontexts: [dev]\n"));
  EXPECT_EQ(e.field, "contexts[0]");
  EXPECT_THAT(e.message, HasSubstr("found a string"));
}

TEST(KubeconfigTextErrors, NameATopLevelThatIsNotAMap) {
  const ConfigError e = error_of(parse("- a\n- b\n"));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_THAT(e.message, HasSubstr("expected a map at the top level, found a list"));
}

TEST(KubeconfigTextErrors, NameAnInsecureFlagThatIsNotABoolean) {
  const ConfigError e =
      error_of(parse(with_cluster("server: https://a:6443\ninsecure-skip-tls-verify: maybe")));
  EXPECT_EQ(e.field, "clusters[local].cluster.insecure-skip-tls-verify");
  EXPECT_THAT(e.message, HasSubstr("true or false"));
}

TEST(KubeconfigTextErrors, NameAClusterListedTwice) {
  const ConfigError e = error_of(parse(R"(current-context: dev
clusters:
- {name: local, cluster: {server: "https://a:6443"}}
- {name: local, cluster: {server: "https://b:6443"}}
contexts: [{name: dev, context: {cluster: local}}]
)"));
  EXPECT_EQ(e.field, "clusters[local]");
  EXPECT_THAT(e.message, HasSubstr("more than once"));
}

TEST(KubeconfigTextErrors, NameInvalidBase64InCertificateAuthorityData) {
  const ConfigError e =
      error_of(parse(with_cluster("server: https://a:6443\ncertificate-authority-data: \"abc!\"")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority-data");
  EXPECT_THAT(e.message, HasSubstr("not valid base64"));
}

TEST(KubeconfigTextErrors, NameInvalidBase64InClientKeyDataWithoutRepeatingIt) {
  const std::string bad = std::string(kSecret) + "==";
  const ConfigError e = error_of(parse(
      with_user("client-certificate-data: " + base64(kCertPem) + "\nclient-key-data: " + bad)));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.client-key-data");
  EXPECT_THAT(e.message, HasSubstr("not valid base64"));
  EXPECT_THAT(e.to_string(), Not(HasSubstr(kSecret)));
}

TEST(KubeconfigTextErrors, NamePaddingInTheMiddleOfBase64) {
  const ConfigError e = error_of(parse(
      with_cluster("server: https://a:6443\ncertificate-authority-data: QQ==" + base64(kCaPem))));
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority-data");
  EXPECT_THAT(e.message, HasSubstr("offset 2"));
}

TEST(KubeconfigTextErrors, NameDataThatDoesNotDecodeToPem) {
  const ConfigError e = error_of(parse(with_cluster(
      "server: https://a:6443\ncertificate-authority-data: " + base64(base64(kCaPem)))));
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority-data");
  EXPECT_THAT(e.message, HasSubstr("PEM"));
}

TEST(KubeconfigTextErrors, NameCertificateAuthorityFileAndDataGivenTogether) {
  const ConfigError e = error_of(parse(with_cluster(
      "server: https://a:6443\ncertificate-authority: /ca.crt\ncertificate-authority-data: " +
      base64(kCaPem))));
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority-data");
  EXPECT_THAT(e.message, HasSubstr("together with certificate-authority"));
}

TEST(KubeconfigTextErrors, NameInsecureSkipTlsVerifyWithACertificateAuthority) {
  const ConfigError e =
      error_of(parse(with_cluster("server: https://a:6443\ninsecure-skip-tls-verify: true\n"
                                  "certificate-authority-data: " +
                                  base64(kCaPem))));
  EXPECT_EQ(e.field, "clusters[local].cluster.insecure-skip-tls-verify");
}

TEST_F(KubeconfigErrors, NameAnUnreadableCertificateAuthorityFile) {
  const ConfigError e = error_of(parse(
      with_cluster("server: https://a:6443\ncertificate-authority: missing/ca.crt"), path("kube")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority");
  EXPECT_THAT(e.message, HasSubstr(path("kube") + "/missing/ca.crt"));
  EXPECT_THAT(e.message, HasSubstr("cannot be read"));
}

TEST_F(KubeconfigErrors, NameAnUnreadableClientKeyFile) {
  const std::string cert = write("client.crt", kCertPem);
  const ConfigError e =
      error_of(parse(with_user("client-certificate: " + cert + "\nclient-key: " + path("none"))));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.client-key");
  EXPECT_THAT(e.message, HasSubstr(path("none")));
}

TEST_F(KubeconfigErrors, NameAReferencedFileThatIsADirectory) {
  const ConfigError e =
      error_of(parse(with_cluster("server: https://a:6443\ncertificate-authority: " + path(""))));
  EXPECT_EQ(e.field, "clusters[local].cluster.certificate-authority");
  EXPECT_THAT(e.message, HasSubstr("not a regular file"));
}

TEST_F(KubeconfigErrors, NameAnUnreadableTokenFile) {
  const ConfigError e = error_of(parse(with_user("tokenFile: no-token"), path("")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.tokenFile");
  EXPECT_THAT(e.message, HasSubstr("no-token"));
}

TEST_F(KubeconfigErrors, NameAClientCertificateWithoutItsKey) {
  const std::string cert = write("client.crt", kCertPem);
  const ConfigError e = error_of(parse(with_user("client-certificate: " + cert)));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.client-key");
  EXPECT_THAT(e.message, HasSubstr("missing"));
}

TEST(KubeconfigTextErrors, NameAClientKeyWithoutItsCertificate) {
  const ConfigError e = error_of(parse(with_user("client-key-data: " + base64(kKeyPem))));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.client-certificate");
  EXPECT_THAT(e.to_string(), Not(HasSubstr("MIIEkeyfake")));
}

TEST(KubeconfigTextErrors, NameExecAsNotSupported) {
  const ConfigError e =
      error_of(parse(with_user("exec:\n  apiVersion: client.authentication.k8s.io/v1\n"
                               "  command: aws")));
  EXPECT_EQ(e.file, kLabel);
  EXPECT_EQ(e.field, "users[admin].user.exec");
  EXPECT_THAT(e.message, HasSubstr("not supported"));
}

TEST(KubeconfigTextErrors, NameAuthProviderAsNotSupported) {
  const ConfigError e = error_of(parse(with_user("auth-provider: {name: oidc}")));
  EXPECT_EQ(e.field, "users[admin].user.auth-provider");
  EXPECT_THAT(e.message, HasSubstr("not supported"));
}

TEST(KubeconfigTextErrors, NameBasicAuthenticationAsNotSupportedWithoutThePassword) {
  const ConfigError e = error_of(parse(with_user(std::string("password: ") + kSecret)));
  EXPECT_EQ(e.field, "users[admin].user.password");
  EXPECT_THAT(e.to_string(), Not(HasSubstr(kSecret)));
}

TEST(KubeconfigTextErrors, NeverRepeatATokenOfTheWrongType) {
  const ConfigError e = error_of(parse(with_user(std::string("token: [") + kSecret + "]")));
  EXPECT_EQ(e.field, "users[admin].user.token");
  EXPECT_THAT(e.to_string(), Not(HasSubstr(kSecret)));
}

TEST_F(KubeconfigErrors, NameAKubeconfigFileThatCannotBeRead) {
  const ConfigError e = error_of(load_kubeconfig(path("absent")));
  EXPECT_EQ(e.file, path("absent"));
  EXPECT_THAT(e.message, HasSubstr("cannot be read"));
}

TEST_F(KubeconfigErrors, NameTheKubeconfigFileAFieldErrorIsIn) {
  const std::string file = write("config", with_cluster("server: {}"));
  const ConfigError e = error_of(load_kubeconfig(file));
  EXPECT_EQ(e.file, file);
  EXPECT_EQ(e.field, "clusters[local].cluster.server");
}

// --- Choosing the source ---

// Sets (or, with nullopt, unsets) an environment variable for one test and puts it back after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = ::getenv(name)) {
      old_ = old;
    }
    set(value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() { set(old_); }

 private:
  void set(const std::optional<std::string>& value) const {
    const int rc = value ? ::setenv(name_, value->c_str(), 1) : ::unsetenv(name_);
    EXPECT_EQ(rc, 0);
  }
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(LoadDefault, UsesTheExplicitPathBeforeKubeconfig) {
  const std::string chosen = write("chosen", kTwoContexts);
  const std::string other = write("other", kubeconfig("server: https://other:6443", "token: abc"));
  const ScopedEnv env("KUBECONFIG", other);
  auto config = load_default(chosen, "prod");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->server, "https://remote.example:443");
}

TEST_F(LoadDefault, UsesTheFirstFileOfKubeconfigThatExists) {
  const std::string second = write("second", kTwoContexts);
  const std::string third = write("third", kubeconfig("server: https://third:6443", "token: a"));
  const ScopedEnv env("KUBECONFIG", path("first") + "::" + second + ":" + third);
  auto config = load_default();
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->server, "https://local:6443");
}

TEST_F(LoadDefault, NamesKubeconfigWhenNoneOfItsFilesExists) {
  const ScopedEnv env("KUBECONFIG", path("a") + ":" + path("b"));
  const ConfigError e = error_of(load_default());
  EXPECT_EQ(e.field, "KUBECONFIG");
  EXPECT_THAT(e.message, HasSubstr(path("b")));
}

TEST_F(LoadDefault, FallsBackToTheKubeConfigInHome) {
  write("home/.kube/config", kTwoContexts);
  const ScopedEnv kubeconfig_env("KUBECONFIG", std::nullopt);
  const ScopedEnv service_env("KUBERNETES_SERVICE_HOST", std::nullopt);
  const ScopedEnv home_env("HOME", path("home"));
  auto config = load_default();
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->context, "dev");
}

TEST_F(LoadDefault, SaysWhatItTriedWhenNothingIsFound) {
  const ScopedEnv kubeconfig_env("KUBECONFIG", std::nullopt);
  const ScopedEnv service_env("KUBERNETES_SERVICE_HOST", std::nullopt);
  const ScopedEnv home_env("HOME", path("home"));
  const ConfigError e = error_of(load_default());
  EXPECT_EQ(e.file, path("home") + "/.kube/config");
  EXPECT_THAT(e.message, HasSubstr("does not exist"));
  EXPECT_THAT(e.message, HasSubstr("KUBECONFIG unset"));
  EXPECT_THAT(e.message, HasSubstr("KUBERNETES_SERVICE_HOST unset"));
}

// --- In-cluster ---

constexpr const char* kServiceAccount = "var/run/secrets/kubernetes.io/serviceaccount/";

std::function<const char*(const char*)> fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

class InClusterWithServiceAccount : public TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    write(std::string(kServiceAccount) + "token", std::string(kSecret) + "\n");
    write(std::string(kServiceAccount) + "ca.crt", kCaPem);
  }
  std::string root() const { return path(""); }
};

TEST_F(InClusterWithServiceAccount, BuildsTheServerFromTheServiceEnvironment) {
  auto config = in_cluster_config(root(), fake_env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                                    {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->context, "");
}

TEST_F(InClusterWithServiceAccount, BracketsAnIpv6Host) {
  auto config = in_cluster_config(root(), fake_env({{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"},
                                                    {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->server, "https://[fd00:10:96::1]:443");
}

TEST_F(InClusterWithServiceAccount, ReturnsTheTokenFileWithoutReadingIt) {
  auto config = in_cluster_config(
      root(), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(fs::path(config->token_file), fs::path(root()) / kServiceAccount / "token");
  EXPECT_EQ(config->token, "");
}

TEST_F(InClusterWithServiceAccount, ReadsTheServiceAccountCa) {
  auto config = in_cluster_config(
      root(), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_FALSE(config->insecure_skip_tls_verify);
}

TEST_F(InClusterWithServiceAccount, ReadsTheNamespaceFile) {
  write(std::string(kServiceAccount) + "namespace", "slurm\n");
  auto config = in_cluster_config(
      root(), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->namespace_name, "slurm");
}

TEST_F(InClusterWithServiceAccount, DefaultsTheNamespaceWithoutANamespaceFile) {
  auto config = in_cluster_config(
      root(), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->namespace_name, "default");
}

TEST_F(InClusterWithServiceAccount, NamesAServiceHostThatIsNotSet) {
  const ConfigError e =
      error_of(in_cluster_config(root(), fake_env({{"KUBERNETES_SERVICE_PORT", "443"}})));
  EXPECT_EQ(e.field, "KUBERNETES_SERVICE_HOST");
}

TEST_F(InClusterWithServiceAccount, NamesAServicePortThatIsNotAPort) {
  const ConfigError e = error_of(in_cluster_config(
      root(), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "https"}})));
  EXPECT_EQ(e.field, "KUBERNETES_SERVICE_PORT");
}

TEST_F(InCluster, NamesTheTokenFileWhenItIsMissing) {
  const ConfigError e = error_of(in_cluster_config(
      path(""), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}})));
  EXPECT_EQ(fs::path(e.file), fs::path(path("")) / kServiceAccount / "token");
  EXPECT_THAT(e.message, HasSubstr("cannot be read"));
}

TEST_F(InCluster, NamesTheCaFileWhenItIsMissing) {
  write(std::string(kServiceAccount) + "token", "t");
  const ConfigError e = error_of(in_cluster_config(
      path(""), fake_env({{"KUBERNETES_SERVICE_HOST", "k"}, {"KUBERNETES_SERVICE_PORT", "443"}})));
  EXPECT_EQ(fs::path(e.file), fs::path(path("")) / kServiceAccount / "ca.crt");
}

// --- Token files ---

TEST_F(ReadTokenFile, TrimsSurroundingWhitespace) {
  const std::string file = write("token", std::string("  ") + kSecret + "\r\n");
  auto token = read_token_file(file);
  ASSERT_TRUE(token.ok()) << token.error().to_string();
  EXPECT_EQ(*token, kSecret);
}

TEST_F(ReadTokenFile, NamesTheFileWhenItCannotBeRead) {
  auto token = read_token_file(path("absent"));
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.error().file, path("absent"));
  EXPECT_THAT(token.error().message, HasSubstr("No such file"));
}

TEST_F(ReadTokenFile, RefusesAnEmptyFile) {
  auto token = read_token_file(write("token", " \n"));
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.error().message, HasSubstr("empty"));
}

}  // namespace
}  // namespace tightrope::kube
