#include "kube/base64.hpp"

#include <openssl/evp.h>

#include <climits>

namespace tightrope::kube {

namespace {
bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

}  // namespace

// client-go reads `*-data` fields and Secret data as Go []byte, whose standard base64 decoder
// skips line breaks; spaces are skipped too, because YAML folding turns line breaks into them.
// The alphabet is checked here because EVP_DecodeBlock reads an '=' anywhere as zero bits.
tightrope::Result<std::string, std::string> decode_base64(std::string_view text) {
  std::string compact;
  compact.reserve(text.size());
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      compact.push_back(c);
    }
  }
  if (compact.size() % 4 != 0) {
    return fail(std::string("is not valid base64: its length is not a multiple of 4"));
  }
  if (compact.size() > static_cast<size_t>(INT_MAX)) {
    return fail(std::string("is too large"));
  }
  size_t padding = 0;
  for (size_t i = 0; i < compact.size(); ++i) {
    const char c = compact[i];
    if (c == '=' && i + 2 >= compact.size()) {
      ++padding;
    } else if (padding > 0 || !is_base64_char(c)) {
      return fail("is not valid base64: unexpected character at offset " + std::to_string(i));
    }
  }
  std::string out(compact.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(compact.data()),
                                static_cast<int>(compact.size()));
  if (n < 0) {
    return fail(std::string("is not valid base64"));
  }
  out.resize(static_cast<size_t>(n) - padding);  // EVP_DecodeBlock counts padding as zero bytes
  return out;
}

std::string encode_base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace tightrope::kube
