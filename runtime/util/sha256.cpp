// Implementation of sha256.hpp.
#include "runtime/util/sha256.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace dseek::util {

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data, bytes, digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: OpenSSL EVP_Digest failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

}  // namespace dseek::util
