// The HTTP side of a node's Prometheus endpoint: a listening socket and one thread that
// answers GET /metrics with the text `render` returns (HTTP/1.0 and 1.1, one request per
// connection, then close). Other paths get 404, other methods 405, a malformed or
// oversized request 400; a client that stalls is dropped after a bounded time, so it can
// neither crash nor hang the node. Connections are served all at once from one poll()
// loop (at most 64; past that the oldest is dropped), so slow clients cannot hold up a
// scrape. Stopping (the destructor) wakes the thread and joins it at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace dseek::metrics {

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;

  // Binds host:port (a numeric address or a name; port 0 = any free port) and starts
  // serving. Throws std::runtime_error "cannot listen on HOST:PORT: REASON".
  MetricsHttpServer(const std::string& host, uint16_t port, Render render);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port it listens on (the chosen one when asked for 0).
  uint16_t port() const { return port_; }

 private:
  void serve();

  Render render_;
  int listen_fd_ = -1;
  int wake_read_fd_ = -1;
  int wake_write_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// The whole response (status line, headers, body) to one request head (the bytes up to
// the empty line): exposed so that the protocol is tested without sockets.
std::string answer_http_request(std::string_view request_head,
                                const MetricsHttpServer::Render& render);

}  // namespace dseek::metrics
