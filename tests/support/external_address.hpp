// The host's first IPv4 address off loopback (an interface that is up), with the
// interface's name: where a test checks that a socket is NOT reachable (the data plane,
// /metrics) besides loopback. nullopt on a host with loopback only.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <optional>
#include <string>

namespace dseek::testing {

struct ExternalAddress {
  std::string interface;  // "eth0"
  std::string ipv4;       // "192.0.2.2"
};

inline std::optional<ExternalAddress> external_ipv4() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return std::nullopt;
  std::optional<ExternalAddress> found;
  for (ifaddrs* i = all; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = ExternalAddress{i->ifa_name, text};
  }
  ::freeifaddrs(all);
  return found;
}

}  // namespace dseek::testing
