// TCP rendezvous (see tcp_bootstrap.hpp).
#include "comm/bootstrap/tcp_bootstrap.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/types.hpp"

namespace dseek::comm {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(ErrorKind kind, const std::string& what) {
  throw CommError(kind, "tcp bootstrap: " + what + (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

void wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return;
    if (rc == 0) {
      errno = 0;
      fail(ErrorKind::timeout, std::string("timed out ") + what);
    }
    if (errno != EINTR) fail(ErrorKind::transport, what);
  }
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    wait_ready(fd, POLLOUT, deadline, "sending");
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) fail(ErrorKind::peer_failed, "send");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    wait_ready(fd, POLLIN, deadline, "receiving");
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) {
      if (k == 0) errno = 0;
      fail(ErrorKind::peer_failed, "peer closed the connection");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void write_blob(int fd, const std::string& s, Clock::time_point deadline) {
  const uint64_t n = s.size();
  write_all(fd, &n, sizeof n, deadline);
  write_all(fd, s.data(), s.size(), deadline);
}

std::string read_blob(int fd, Clock::time_point deadline) {
  uint64_t n = 0;
  read_all(fd, &n, sizeof n, deadline);
  if (n > (uint64_t{1} << 30)) {
    errno = 0;
    fail(ErrorKind::transport, "implausible record size");
  }
  std::string s(n, '\0');
  read_all(fd, s.data(), n, deadline);
  return s;
}

sockaddr_in make_addr(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    errno = 0;
    fail(ErrorKind::invalid_argument, "not an IPv4 address: " + host);
  }
  return a;
}

}  // namespace

TcpBootstrap::TcpBootstrap(std::string host, int port, int rank, int size)
    : host_(std::move(host)), port_(port), rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size) throw CommError(ErrorKind::invalid_argument, "bad rank/size for bootstrap");
  if (rank_ != 0) return;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) fail(ErrorKind::transport, "socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart during TIME_WAIT
  sockaddr_in a = make_addr(host_, port_);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    fail(ErrorKind::transport, "bind " + host_ + ":" + std::to_string(port_));
  if (::listen(listen_fd_, size) != 0) fail(ErrorKind::transport, "listen");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

TcpBootstrap::~TcpBootstrap() {
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<std::string> TcpBootstrap::all_gather(const std::string& mine, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (size_ == 1) return {mine};
  if (rank_ == 0) {
    if (peers_.empty()) {
      // First round: accept every other rank; each announces its rank.
      peers_.assign(static_cast<size_t>(size_), -1);
      for (int accepted = 0; accepted < size_ - 1;) {
        wait_ready(listen_fd_, POLLIN, deadline, "waiting for ranks to connect");
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        int32_t r = -1;
        read_all(fd, &r, sizeof r, deadline);
        if (r <= 0 || r >= size_ || peers_[static_cast<size_t>(r)] >= 0) {
          ::close(fd);
          errno = 0;
          fail(ErrorKind::invalid_argument, "unexpected rank " + std::to_string(r) + " connected");
        }
        peers_[static_cast<size_t>(r)] = fd;
        ++accepted;
      }
    }
    std::vector<std::string> all(static_cast<size_t>(size_));
    all[0] = mine;
    for (int r = 1; r < size_; ++r) all[static_cast<size_t>(r)] = read_blob(peers_[static_cast<size_t>(r)], deadline);
    for (int r = 1; r < size_; ++r)
      for (const auto& s : all) write_blob(peers_[static_cast<size_t>(r)], s, deadline);
    return all;
  }
  if (peers_.empty()) {
    // Rank 0 may not be listening yet: retry until the deadline.
    const sockaddr_in a = make_addr(host_, port_);
    for (;;) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) fail(ErrorKind::transport, "socket");
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        peers_.push_back(fd);
        break;
      }
      ::close(fd);
      if (Clock::now() > deadline) fail(ErrorKind::timeout, "cannot reach rank 0 at " + host_ + ":" + std::to_string(port_));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int32_t r = rank_;
    write_all(peers_[0], &r, sizeof r, deadline);
  }
  write_blob(peers_[0], mine, deadline);
  std::vector<std::string> all(static_cast<size_t>(size_));
  for (auto& s : all) s = read_blob(peers_[0], deadline);
  return all;
}

}  // namespace dseek::comm
