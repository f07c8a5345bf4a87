// A plain HTTP client for the tests of the /metrics endpoint: sends raw request bytes to
// host:port, reads until the server closes (bounded by a timeout), and splits the reply
// into status, headers and body. Header-only so that any test executable can use it.
#pragma once

#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

namespace dseek::testing {

struct HttpReply {
  int status = 0;
  std::string headers;  // the lines after the status line, "\r\n"-separated
  std::string body;
};

// The raw bytes the server sent back; nullopt when nothing listens there (connection
// refused) or the reply did not end within `timeout`.
inline std::optional<std::string> http_exchange(const std::string& ipv4, int port,
                                                const std::string& request,
                                                std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ipv4.c_str(), &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string reply;
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;  // the server closed: the reply is whole
    reply.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

// The reply split up; status 0 when there was none or it is not HTTP.
inline HttpReply parse_http_reply(const std::string& raw) {
  HttpReply reply;
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return reply;
  reply.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  const size_t first_line_end = raw.find("\r\n");
  reply.headers = raw.substr(first_line_end + 2, head_end - first_line_end - 2);
  reply.body = raw.substr(head_end + 4);
  return reply;
}

inline HttpReply http_get(const std::string& ipv4, int port, const std::string& path,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto raw = http_exchange(
      ipv4, port, "GET " + path + " HTTP/1.1\r\nHost: " + ipv4 + "\r\nAccept: */*\r\n\r\n",
      timeout);
  return raw ? parse_http_reply(*raw) : HttpReply{};
}

}  // namespace dseek::testing
