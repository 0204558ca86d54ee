// The login pods' SSH host keys: the three files sshd's HostKey lines name, in the formats
// sshd reads, and (where ssh-keygen is installed) keys that OpenSSH itself accepts.
#include "operator/ssh_keys.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tightrope::op {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The executable `name` in a PATH directory, if any.
std::optional<std::filesystem::path> on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) {
    return std::nullopt;
  }
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

// A private temporary file holding `content`, mode 0600 as ssh-keygen demands of a key.
class PrivateFile {
 public:
  explicit PrivateFile(const std::string& content) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tightrope-ssh-key-XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) {
      throw std::runtime_error("mkstemp failed");
    }
    path_ = pattern;
    const bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, content.data(), content.size()) ==
                                                   static_cast<ssize_t>(content.size());
    ::close(fd);
    if (!ok) {
      throw std::runtime_error("cannot write " + path_.string());
    }
  }
  ~PrivateFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct PipeCloser {
  void operator()(FILE* f) const { ::pclose(f); }
};

// stdout of `command` (stderr dropped).
std::string run(const std::string& command) {
  std::unique_ptr<FILE, PipeCloser> pipe(::popen((command + " 2>/dev/null").c_str(), "r"));
  if (!pipe) {
    return "";
  }
  std::string out;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0) {
    out.append(buffer.data(), n);
  }
  return out;
}

// One set for the tests that only read keys: an RSA 3072 key takes a while to make.
const std::map<std::string, std::string>& shared_keys() {
  static const auto keys = generate_ssh_host_keys();
  return keys;
}

TEST(SshHostKeys, AreTheThreeFilesSshdLoadsInTheFormatsItReads) {
  const auto& keys = shared_keys();
  ASSERT_EQ(keys.size(), 3u);
  const std::map<std::string, std::string> headers = {
      {"ssh_host_rsa_key", "RSA PRIVATE KEY"},
      {"ssh_host_ecdsa_key", "EC PRIVATE KEY"},
      {"ssh_host_ed25519_key", "OPENSSH PRIVATE KEY"}};
  for (const auto& [file, label] : headers) {
    ASSERT_EQ(keys.count(file), 1u) << file;
    const std::string& pem = keys.at(file);
    EXPECT_TRUE(starts_with(pem, "-----BEGIN " + label + "-----\n")) << file << ":\n" << pem;
    EXPECT_TRUE(ends_with(pem, "-----END " + label + "-----\n")) << file << ":\n" << pem;
  }
}

TEST(SshHostKeys, AreNewEachTime) {
  const auto fresh = generate_ssh_host_keys();
  for (const auto& [file, key] : shared_keys()) {
    EXPECT_NE(fresh.at(file), key) << file;
  }
}

TEST(SshHostKeys, OpenSshDerivesAPublicKeyOfTheRightTypeFromEach) {
  const auto ssh_keygen = on_path("ssh-keygen");
  if (!ssh_keygen) {
    GTEST_SKIP() << "ssh-keygen is not installed (package openssh-client)";
  }
  const std::map<std::string, std::string> types = {{"ssh_host_rsa_key", "ssh-rsa "},
                                                    {"ssh_host_ecdsa_key", "ecdsa-sha2-nistp256 "},
                                                    {"ssh_host_ed25519_key", "ssh-ed25519 "}};
  for (const auto& [file, key] : shared_keys()) {
    ASSERT_EQ(types.count(file), 1u) << file;
    const PrivateFile private_key(key);
    const std::string public_key =
        run(ssh_keygen->string() + " -y -f '" + private_key.path().string() + "'");
    EXPECT_TRUE(starts_with(public_key, types.at(file)))
        << file << ": ssh-keygen -y printed \"" << public_key << "\"";
  }
}

}  // namespace
}  // namespace tightrope::op
