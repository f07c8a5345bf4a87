// Which network interface owns an address (getifaddrs): the data plane binds UCX's
// network transports to the interface of the node's advertised address only, so a local
// job's UCX listens on loopback and a multi-host job's on the network it advertises, not
// on every interface of the host (issue 28, "security defaults").
#pragma once

#include <optional>
#include <string>

namespace dseek::comm {

// The name of the interface ("lo", "eth0") that holds `host` (an IPv4 or IPv6 address or
// a name resolved to one), or whose subnet contains it (127.0.0.2 on lo); nullopt when
// no local interface does.
std::optional<std::string> net_device_of(const std::string& host);

}  // namespace dseek::comm
