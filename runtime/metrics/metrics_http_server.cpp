// Implementation of metrics_http_server.hpp: POSIX sockets, poll() with a wake-up pipe
// so that the thread never blocks where the destructor could not reach it.
#include "runtime/metrics/metrics_http_server.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "runtime/metrics/prometheus_text.hpp"
#include "runtime/util/tcp_listener.hpp"

namespace dseek::metrics {

namespace {

using Clock = std::chrono::steady_clock;

// A scraper sends a few hundred bytes and reads at once; anything slower or bigger is
// not one.
constexpr size_t kMaxRequestHead = 8192;
constexpr auto kConnectionDeadline = std::chrono::seconds(5);
// Connections served at once; a scraper needs one.
constexpr size_t kMaxConnections = 64;

std::string response(int status, std::string_view reason, std::string_view content_type,
                     const std::string& body, bool with_body,
                     std::string_view extra_header = {}) {
  std::string text = "HTTP/1.1 " + std::to_string(status) + " ";
  text += reason;
  text += "\r\nContent-Type: ";
  text += content_type;
  text += "\r\nContent-Length: " + std::to_string(body.size());
  text += "\r\nConnection: close\r\n";
  text += extra_header;
  text += "\r\n";
  if (with_body) text += body;
  return text;
}

std::string plain(int status, std::string_view reason, bool with_body,
                  std::string_view extra_header = {}) {
  return response(status, reason, "text/plain; charset=utf-8",
                  std::to_string(status) + " " + std::string(reason) + "\n", with_body,
                  extra_header);
}

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t end = line.find(' ', pos);
    const size_t stop = end == std::string_view::npos ? line.size() : end;
    parts.push_back(line.substr(pos, stop - pos));
    pos = stop + 1;
  }
  return parts;
}

[[noreturn]] void fail_listen(const std::string& where, const std::string& reason) {
  throw std::runtime_error("cannot listen on " + where + ": " + reason);
}

}  // namespace

std::string answer_http_request(std::string_view head, const MetricsHttpServer::Render& render) {
  size_t line_end = head.find('\n');
  if (line_end == std::string_view::npos) line_end = head.size();
  std::string_view line = head.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto parts = split_spaces(line);
  if (parts.size() != 3 || (parts[2] != "HTTP/1.0" && parts[2] != "HTTP/1.1") ||
      parts[1].empty() || parts[1][0] != '/')
    return plain(400, "Bad Request", true);
  const bool head_only = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head_only)
    return plain(405, "Method Not Allowed", true, "Allow: GET, HEAD\r\n");
  std::string_view path = parts[1];
  path = path.substr(0, path.find('?'));  // a scraper may add parameters; none are used
  if (path != "/metrics") return plain(404, "Not Found", !head_only);
  std::string body;
  try {
    body = render();
  } catch (const std::exception& error) {
    return response(500, "Internal Server Error", "text/plain; charset=utf-8",
                    std::string(error.what()) + "\n", !head_only);
  }
  return response(200, "OK", kPrometheusContentType, body, !head_only);
}

MetricsHttpServer::MetricsHttpServer(const std::string& host, uint16_t port, Render render)
    : render_(std::move(render)) {
  listen_fd_ = util::open_tcp_listener(host, port, 16, port_);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(listen_fd_);
    fail_listen(host + ":" + std::to_string(port), "pipe: " + reason);
  }
  wake_read_fd_ = pipe_fds[0];
  wake_write_fd_ = pipe_fds[1];
  thread_ = std::thread([this] { serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const char stop = 's';
  [[maybe_unused]] const auto written = ::write(wake_write_fd_, &stop, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
}

// Every open connection is served at once from one poll() loop: a client that stalls
// holds only its own slot until its deadline (one at a time, 20 slow clients blocked a
// scrape for 89 s: issue 28, finding 7). Past kMaxConnections the oldest is dropped.
void MetricsHttpServer::serve() {
  struct Connection {
    int fd;
    Clock::time_point deadline;
    std::string head;
    std::string reply;  // non-empty once the request is complete
    size_t sent = 0;
  };
  std::vector<Connection> connections;
  auto drop = [&](size_t i) {
    ::close(connections[i].fd);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
  };
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}});
    auto nearest = Clock::time_point::max();
    for (const auto& c : connections) {
      fds.push_back({c.fd, static_cast<short>(c.reply.empty() ? POLLIN : POLLOUT), 0});
      nearest = std::min(nearest, c.deadline);
    }
    int timeout = -1;
    if (!connections.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(left.count(), 0) + 1);
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || fds[1].revents != 0) break;
    // Serve the ready connections (back to front: dropping shifts only later ones).
    const auto now = Clock::now();
    for (size_t i = connections.size(); i-- > 0;) {
      Connection& c = connections[i];
      const short revents = fds[i + 2].revents;
      if (revents == 0) {
        if (now >= c.deadline) drop(i);
        continue;
      }
      if (c.reply.empty()) {
        char buffer[1024];
        const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n > 0) c.head.append(buffer, static_cast<size_t>(n));
        const bool ended = c.head.find("\r\n\r\n") != std::string::npos ||
                           c.head.find("\n\n") != std::string::npos;
        const bool too_big = c.head.size() > kMaxRequestHead;
        if (n <= 0 && c.head.empty()) {  // closed without a request
          drop(i);
          continue;
        }
        if (ended || too_big || n <= 0)
          // A head too big to be a scrape answers 400 (an empty head is no request line).
          c.reply = answer_http_request(too_big ? std::string_view() : std::string_view(c.head), render_);
      } else {
        const ssize_t n = ::send(c.fd, c.reply.data() + c.sent, c.reply.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          drop(i);
          continue;
        }
        c.sent += static_cast<size_t>(n);
        if (c.sent == c.reply.size()) drop(i);
      }
    }
    if ((fds[0].revents & POLLIN) != 0) {
      const int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (connection < 0) {
        // Out of descriptors leaves the connection pending and poll() ready at once: wait
        // a little instead of spinning. (Other errors: the client gave up already.)
        if (errno == EMFILE || errno == ENFILE)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (connections.size() >= kMaxConnections) drop(0);  // the oldest
      connections.push_back({connection, Clock::now() + kConnectionDeadline, {}, {}, 0});
    }
  }
  for (const auto& c : connections) ::close(c.fd);
}

}  // namespace dseek::metrics
