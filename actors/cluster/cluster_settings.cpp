#include "actors/cluster/cluster_settings.hpp"

#include <cstdlib>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace dseek::actors {
namespace {

std::string to_hex(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 0xf]);
  }
  return out;
}

} // namespace

std::optional<std::string> resolve_secret(const ClusterSettings& settings) {
  if (!settings.secret.empty())
    return settings.secret;
  if (const char* env = std::getenv("DSEEK_CLUSTER_SECRET"); env != nullptr && *env != '\0')
    return std::string{env};
  return std::nullopt;
}

std::string make_nonce() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return to_hex(buf, sizeof buf);
}

std::uint64_t make_data_key() {
  std::uint64_t key = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&key), sizeof key) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return key;
}

std::string join_mac(const std::string& secret, const std::string& nonce,
                     std::int64_t node_id) {
  std::string msg = nonce + std::to_string(node_id);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len)
      == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return to_hex(out, len);
}

bool verify_join_mac(const std::string& secret, const std::string& nonce,
                     std::int64_t node_id, const std::string& mac) {
  auto expected = join_mac(secret, nonce, node_id);
  if (mac.size() != expected.size())
    return false;
  return CRYPTO_memcmp(expected.data(), mac.data(), expected.size()) == 0;
}

std::string coordinator_mac(const std::string& secret, const std::string& node_nonce,
                            const std::string& nonce, std::int64_t node_id) {
  // join_mac's message is nonce || node_id, hex and digits only: this one starts with a
  // letter outside hex and holds separators, so neither side's proof serves as the other's.
  return join_mac(secret, "coordinator" + node_nonce + "|" + nonce + "|", node_id);
}

bool verify_coordinator_mac(const std::string& secret, const std::string& node_nonce,
                            const std::string& nonce, std::int64_t node_id,
                            const std::string& mac) {
  return verify_join_mac(secret, "coordinator" + node_nonce + "|" + nonce + "|", node_id, mac);
}

std::optional<host_port> parse_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return std::nullopt;
  host_port hp;
  hp.host = s.substr(0, colon);
  if (hp.host.size() > 2 && hp.host.front() == '[' && hp.host.back() == ']')
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  unsigned long v = 0;
  for (std::size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9')
      return std::nullopt;
    v = v * 10 + static_cast<unsigned long>(s[i] - '0');
    if (v > 65535)
      return std::nullopt;
  }
  hp.port = static_cast<std::uint16_t>(v);
  return hp;
}

} // namespace dseek::actors
