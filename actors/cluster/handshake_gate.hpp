// The coordinator's public port: a TCP relay in front of CAF's middleman, which holds a
// connection that never finishes its handshake for ever (issue 28, finding 2: 5000 such
// connections were held for 40 s, and a flood of them could starve real joins).
//
// The gate listens on the public address, connects each client to the coordinator's
// loopback-only CAF port and relays the bytes both ways (plain BASP or TLS alike: it
// never reads them). A connection is pending until the coordinator answered bytes the
// client sent (the handshake done and a first request answered, or a TLS ServerHello);
// one still pending after 2 s is closed, and a source address that already has 8
// pending connections gets new ones closed at once (at most 4096 are relayed at once). A
// real node's join is retried by its agent, so at worst it waits out a hostile source's
// timeout.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

namespace dseek::actors {

class HandshakeGate {
 public:
  // Listens on host:port (port 0 = any free one) and relays to 127.0.0.1:target_port.
  // Throws std::runtime_error naming the address it cannot listen on.
  HandshakeGate(const std::string& host, std::uint16_t port, std::uint16_t target_port);
  ~HandshakeGate();  // closes every connection and stops the relay thread
  HandshakeGate(const HandshakeGate&) = delete;
  HandshakeGate& operator=(const HandshakeGate&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  void run();

  std::uint16_t target_port_ = 0;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor writes to stop run()
  std::thread thread_;
};

}  // namespace dseek::actors
