// A listening TCP socket on host:port (a numeric address or a name; port 0 = any free
// port), for the servers a node runs itself: the /metrics endpoint and the coordinator's
// handshake gate. SO_REUSEADDR (a restart while old connections sit in TIME_WAIT; Linux
// still refuses a port another socket listens on), close-on-exec, blocking.
#pragma once

#include <cstdint>
#include <string>

namespace dseek::util {

// The socket, and in `bound_port` the port it got. Throws std::runtime_error
// "cannot listen on HOST:PORT: REASON".
int open_tcp_listener(const std::string& host, uint16_t port, int backlog, uint16_t& bound_port);

}  // namespace dseek::util
