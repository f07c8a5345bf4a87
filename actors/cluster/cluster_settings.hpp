// Settings of the cluster membership control plane, and the join
// authentication (HMAC-SHA256 challenge-response). No CAF here. A node fills them from
// its [cluster] config (cluster_settings_of, node_tree.hpp).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <optional>
#include <string>

namespace dseek::actors {

struct ClusterSettings {
  // Shared by every node of the job. Empty: taken from DSEEK_CLUSTER_SECRET.
  std::string secret;
  // A member heartbeats this often; the coordinator declares it lost when
  // no heartbeat came for heartbeat_timeout (a hung node; a dead one is seen
  // at once through its down message). The agent declares the coordinator
  // lost when no heartbeat reply came for heartbeat_timeout.
  std::chrono::milliseconds heartbeat_interval{250};
  std::chrono::milliseconds heartbeat_timeout{1500};
  // Connecting and joining: attempts (1 + retries), the pause between them,
  // and the limit of one connect / one request of the handshake.
  std::uint32_t join_retries = 20;
  std::chrono::milliseconds join_retry_delay{250};
  std::chrono::milliseconds connect_timeout{2000};
  // How long a challenge (nonce) stays valid.
  std::chrono::milliseconds challenge_lifetime{10000};
};

// The secret to use: settings.secret if set, else $DSEEK_CLUSTER_SECRET;
// nullopt if both are empty.
std::optional<std::string> resolve_secret(const ClusterSettings& settings);

// 32 random bytes from OpenSSL's RAND_bytes, hex encoded. Throws
// std::runtime_error if the generator fails.
// One log line "[<who>] <printf message>" on stderr, flushed (Debian's CAF has no
// logging); the coordinator and the node agents share it.
template <class... Ts>
void log_line(const char* who, const char* fmt, Ts... xs) {
  char message[512];
  std::snprintf(message, sizeof message, fmt, xs...);
  std::fprintf(stderr, "[%s] %s\n", who, message);
  std::fflush(stderr);
}

std::string make_nonce();
// A fresh 64-bit data-plane key from OpenSSL's CSPRNG (rendezvous_result::data_key).
std::uint64_t make_data_key();

// hex(HMAC-SHA256(secret, nonce || decimal node_id)). The nonce is used as
// the text it travels as (hex).
std::string join_mac(const std::string& secret, const std::string& nonce,
                     std::int64_t node_id);

// Constant-time check of a proof against the expected MAC.
bool verify_join_mac(const std::string& secret, const std::string& nonce,
                     std::int64_t node_id, const std::string& mac);

// The coordinator's side of the mutual challenge: hex(HMAC-SHA256(secret,
// "coordinator" || node_nonce || "|" || nonce || "|" || node_id)), a message no node proof
// has the form of.
std::string coordinator_mac(const std::string& secret, const std::string& node_nonce,
                            const std::string& nonce, std::int64_t node_id);
bool verify_coordinator_mac(const std::string& secret, const std::string& node_nonce,
                            const std::string& nonce, std::int64_t node_id,
                            const std::string& mac);

// "host:port" -> (host, port). nullopt if malformed.
struct host_port {
  std::string host;
  std::uint16_t port = 0;
};
std::optional<host_port> parse_host_port(const std::string& s);

} // namespace dseek::actors
