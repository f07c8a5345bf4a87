// Implementation of transport_security.hpp.
#include "actors/cluster/transport_security.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "actors/cluster/cluster_settings.hpp"
#include "runtime/config/load.hpp"

namespace dseek::actors {

namespace {

bool loopback_address(const sockaddr* address) {
  if (address->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  if (address->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return false;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "ip6-localhost") return true;
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  // A name is loopback when every address it stands for is (Debian's 127.0.1.1 for the
  // host's own name); one that does not resolve is not.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(bare.c_str(), nullptr, &hints, &found) != 0) return false;
  bool all = found != nullptr;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) all = all && loopback_address(a->ai_addr);
  ::freeaddrinfo(found);
  return all;
}

std::string check_transport_security(const config::ClusterConfig& cluster) {
  if (cluster.nodes <= 1 || !cluster.tls_ca.empty()) return "";
  std::string off_loopback;
  const auto coordinator = parse_host_port(cluster.coordinator);
  const std::string coordinator_host = coordinator ? coordinator->host : cluster.coordinator;
  if (!is_loopback_host(coordinator_host))
    off_loopback = "cluster.coordinator = \"" + cluster.coordinator + "\"";
  else if (!is_loopback_host(cluster.advertise_host))
    off_loopback = "cluster.advertise_host = \"" + cluster.advertise_host + "\"";
  if (off_loopback.empty()) return "";
  if (!cluster.plaintext)
    throw config::ConfigError(
        "the job spans hosts (" + off_loopback + " is not loopback) and has no TLS: set "
        "cluster.tls_ca, cluster.tls_cert and cluster.tls_key (docs/clusters.md, \"Security\"), "
        "or cluster.plaintext = true to run the control plane unencrypted");
  return "warning: cluster.plaintext = true: the control plane between hosts (" + off_loopback +
         ") is not encrypted, and the data plane never is; anyone on the network can read it";
}

}  // namespace dseek::actors
