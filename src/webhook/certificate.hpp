// The webhook's serving certificate, read from PEM files and read again when they change on
// disk: kubelet updates a mounted Secret by swapping a symlink, so cert-manager's renewal reaches
// the server without a restart. Knows OpenSSL, not HTTP.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace tightrope::webhook {

class ServingCertificate {
  struct Private {
    explicit Private() = default;
  };

 public:
  // Reads the certificate chain (leaf first) and its private key; the error names the file and
  // what is wrong with it.
  static tightrope::Result<std::unique_ptr<ServingCertificate>, std::string> load(
      std::filesystem::path cert_file, std::filesystem::path key_file);
  ServingCertificate(Private, std::filesystem::path cert_file, std::filesystem::path key_file);
  ~ServingCertificate();
  ServingCertificate(const ServingCertificate&) = delete;
  ServingCertificate& operator=(const ServingCertificate&) = delete;

  // Prepares a server context: TLS 1.2 at least, the current pair as its default, and a hook
  // that looks at the files again before each handshake (at most once a second) and hands the
  // connection the newest pair. The context must not outlive this object.
  bool configure(ssl_ctx_st* ctx);

  // Reads the files again when their modification time or size changed. A pair that does not
  // load (a file half written, a key that does not match) leaves the previous one in place and
  // is tried again at the next look. True when a new pair was taken.
  bool refresh();

  // The leaf's subject ("CN=slurm-operator-webhook.slinky.svc"), for logs and tests.
  std::string subject() const;
  // When the leaf expires (its notAfter), for the expiry metric and its alert.
  std::chrono::system_clock::time_point not_after() const;

 private:
  struct Pair;
  struct Stamp {
    std::filesystem::file_time_type cert_time{};
    std::filesystem::file_time_type key_time{};
    std::uintmax_t cert_size = 0;
    std::uintmax_t key_size = 0;
    bool operator==(const Stamp&) const = default;
  };

  static tightrope::Result<std::shared_ptr<const Pair>, std::string> read_pair(
      const std::filesystem::path& cert_file, const std::filesystem::path& key_file);
  Stamp stamp() const;
  std::shared_ptr<const Pair> current() const;
  static int on_handshake(ssl_st* ssl, void* self);

  std::filesystem::path cert_file_;
  std::filesystem::path key_file_;
  mutable std::mutex mu_;
  std::shared_ptr<const Pair> pair_;
  Stamp stamp_;
  Stamp failed_stamp_;  // the files as they were when they last failed to load
  std::chrono::steady_clock::time_point last_look_{};
};

}  // namespace tightrope::webhook
