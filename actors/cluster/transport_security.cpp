// Implementation of transport_security.hpp.
#include "actors/cluster/transport_security.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "actors/cluster/cluster_settings.hpp"
#include "runtime/config/load.hpp"

namespace dseek::actors {

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "ip6-localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return false;
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
