#include "webhook/certificate.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <ctime>
#include <system_error>

#include "base/log.hpp"

namespace tightrope::webhook {
namespace {

// OpenSSL's reason for the last failure, and its queue emptied.
std::string openssl_error() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    std::array<char, 256> text{};
    ERR_error_string_n(code, text.data(), text.size());
    out = text.data();  // the last one is the closest to the cause
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

struct BioCloser {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioCloser>;

std::string name_of(X509* cert) {
  BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
    return "";
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
}

// An ASN1 time as a time point; the epoch when OpenSSL cannot read it.
std::chrono::system_clock::time_point time_of(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    return {};
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace

// One certificate chain and its key. Immutable once read: a handshake under way keeps the pair
// it took while a newer one replaces it.
struct ServingCertificate::Pair {
  X509* leaf = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509) * chain = nullptr;  // intermediates, leaf excluded
  std::string subject;
  std::chrono::system_clock::time_point not_after{};

  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(leaf);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
  }
};

ServingCertificate::ServingCertificate(Private /*only load()*/, std::filesystem::path cert_file,
                                       std::filesystem::path key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

ServingCertificate::~ServingCertificate() = default;

tightrope::Result<std::unique_ptr<ServingCertificate>, std::string> ServingCertificate::load(
    std::filesystem::path cert_file, std::filesystem::path key_file) {
  auto out =
      std::make_unique<ServingCertificate>(Private(), std::move(cert_file), std::move(key_file));
  out->stamp_ = out->stamp();
  auto pair = read_pair(out->cert_file_, out->key_file_);
  if (!pair) {
    return fail(pair.error());
  }
  out->pair_ = std::move(*pair);
  return out;
}

tightrope::Result<std::shared_ptr<const ServingCertificate::Pair>, std::string>
ServingCertificate::read_pair(const std::filesystem::path& cert_file,
                              const std::filesystem::path& key_file) {
  ERR_clear_error();
  auto pair = std::make_shared<Pair>();
  BioPtr certs(BIO_new_file(cert_file.c_str(), "r"));
  if (!certs) {
    return fail(cert_file.string() + ": " + openssl_error());
  }
  pair->leaf = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr);
  if (pair->leaf == nullptr) {
    return fail(cert_file.string() + ": no PEM certificate: " + openssl_error());
  }
  pair->chain = sk_X509_new_null();
  while (X509* next = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    if (sk_X509_push(pair->chain, next) == 0) {
      X509_free(next);
      return fail(cert_file.string() + ": out of memory");
    }
  }
  ERR_clear_error();  // the end of the file reads as "no start line"
  BioPtr key(BIO_new_file(key_file.c_str(), "r"));
  if (!key) {
    return fail(key_file.string() + ": " + openssl_error());
  }
  pair->key = PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr);
  if (pair->key == nullptr) {
    return fail(key_file.string() + ": no PEM private key: " + openssl_error());
  }
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    return fail(key_file.string() + " is not the key of the certificate in " + cert_file.string());
  }
  pair->subject = name_of(pair->leaf);
  pair->not_after = time_of(X509_get0_notAfter(pair->leaf));
  return std::shared_ptr<const Pair>(std::move(pair));
}

ServingCertificate::Stamp ServingCertificate::stamp() const {
  // A file missing for a moment (mid-rotation) stamps as zero and differs from the last one.
  std::error_code ec;
  Stamp s;
  s.cert_time = std::filesystem::last_write_time(cert_file_, ec);
  s.cert_size = std::filesystem::file_size(cert_file_, ec);
  s.key_time = std::filesystem::last_write_time(key_file_, ec);
  s.key_size = std::filesystem::file_size(key_file_, ec);
  return s;
}

std::shared_ptr<const ServingCertificate::Pair> ServingCertificate::current() const {
  std::lock_guard lock(mu_);
  return pair_;
}

bool ServingCertificate::refresh() {
  const Stamp now = stamp();
  {
    std::lock_guard lock(mu_);
    if (now == stamp_ || now == failed_stamp_) {
      return false;
    }
  }
  auto pair = read_pair(cert_file_, key_file_);
  std::lock_guard lock(mu_);
  if (!pair) {
    failed_stamp_ = now;
    log::warn("webhook.certificate_reload_failed",
              {{"cert_file", cert_file_.string()}, {"error", pair.error()}});
    return false;
  }
  pair_ = std::move(*pair);
  stamp_ = now;
  failed_stamp_ = {};
  log::info("webhook.certificate_reloaded",
            {{"cert_file", cert_file_.string()}, {"subject", pair_->subject}});
  return true;
}

std::string ServingCertificate::subject() const {
  return current()->subject;
}

std::chrono::system_clock::time_point ServingCertificate::not_after() const {
  return current()->not_after;
}

int ServingCertificate::on_handshake(ssl_st* ssl, void* arg) {
  auto* self = static_cast<ServingCertificate*>(arg);
  bool look = false;
  {
    std::lock_guard lock(self->mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - self->last_look_ >= std::chrono::seconds(1)) {
      self->last_look_ = now;
      look = true;
    }
  }
  if (look) {
    self->refresh();
  }
  const auto pair = self->current();
  // The connection holds its own references to the pair's objects (up_ref inside).
  return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, 1) == 1 ? 1 : 0;
}

bool ServingCertificate::configure(ssl_ctx_st* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  const auto pair = current();
  if (SSL_CTX_use_cert_and_key(ctx, pair->leaf, pair->key, pair->chain, 1) != 1) {
    log::error("webhook.tls_setup_failed", {{"error", openssl_error()}});
    return false;
  }
  SSL_CTX_set_cert_cb(ctx, &ServingCertificate::on_handshake, this);
  return true;
}

}  // namespace tightrope::webhook
