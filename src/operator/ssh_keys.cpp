#include "operator/ssh_keys.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "kube/base64.hpp"

namespace tightrope::op {
namespace {

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

Pkey generate(const char* algorithm, const char* parameter = nullptr, unsigned bits = 0) {
  EVP_PKEY* key = nullptr;
  if (bits != 0) {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm, static_cast<size_t>(bits));
  } else if (parameter != nullptr) {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm, parameter);
  } else {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm);
  }
  if (key == nullptr) {
    throw std::runtime_error(std::string("cannot generate a ") + algorithm + " key");
  }
  return Pkey(key);
}

std::string traditional_pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey_traditional(bio.get(), key, nullptr, nullptr, 0, nullptr,
                                                   nullptr) != 1) {
    throw std::runtime_error("cannot encode an SSH host key");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<size_t>(size)};
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xff));
  }
}
void put_string(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

// PROTOCOL.key of OpenSSH: an unencrypted "openssh-key-v1" container with one key.
std::string openssh_ed25519(EVP_PKEY* key) {
  std::array<unsigned char, 32> priv{};
  std::array<unsigned char, 32> pub{};
  size_t priv_len = priv.size();
  size_t pub_len = pub.size();
  if (EVP_PKEY_get_raw_private_key(key, priv.data(), &priv_len) != 1 ||
      EVP_PKEY_get_raw_public_key(key, pub.data(), &pub_len) != 1) {
    throw std::runtime_error("cannot read the Ed25519 key");
  }
  const std::string pub_bytes(reinterpret_cast<const char*>(pub.data()), pub_len);
  std::string public_blob;
  put_string(public_blob, "ssh-ed25519");
  put_string(public_blob, pub_bytes);
  std::string section;
  uint32_t check = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&check), sizeof(check));
  put_u32(section, check);
  put_u32(section, check);
  put_string(section, "ssh-ed25519");
  put_string(section, pub_bytes);
  put_string(section,
             std::string(reinterpret_cast<const char*>(priv.data()), priv_len) + pub_bytes);
  put_string(section, "tightrope");
  for (char pad = 1; section.size() % 8 != 0; ++pad) {
    section.push_back(pad);
  }
  std::string blob("openssh-key-v1");
  blob.push_back('\0');
  put_string(blob, "none");
  put_string(blob, "none");
  put_string(blob, "");
  put_u32(blob, 1);
  put_string(blob, public_blob);
  put_string(blob, section);
  const std::string b64 = kube::encode_base64(blob);
  std::string pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 70) {
    pem += b64.substr(i, 70) + "\n";
  }
  pem += "-----END OPENSSH PRIVATE KEY-----\n";
  return pem;
}

}  // namespace

std::map<std::string, std::string> generate_ssh_host_keys() {
  std::map<std::string, std::string> keys;
  keys["ssh_host_rsa_key"] = traditional_pem(generate("RSA", nullptr, 3072).get());
  keys["ssh_host_ecdsa_key"] = traditional_pem(generate("EC", "P-256").get());
  keys["ssh_host_ed25519_key"] = openssh_ed25519(generate("ED25519").get());
  return keys;
}

}  // namespace tightrope::op
