// Implementation of handshake_gate.hpp: one thread, poll(2) over non-blocking sockets,
// a bounded buffer per direction.
#include "actors/cluster/handshake_gate.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <stdexcept>
#include <vector>

#include "runtime/util/tcp_listener.hpp"

namespace dseek::actors {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPendingTimeout{2000};  // for a pending connection
constexpr std::size_t kPerSource = 8;          // pending connections of one address
constexpr std::size_t kMaxConnections = 4096;  // relayed at once, all sources

constexpr std::size_t kBufferCap = std::size_t{4} << 20;  // per direction, then stop reading

struct Relay {
  int client = -1;
  int server = -1;
  std::string source;      // the client's address
  std::string to_server;   // read from the client, not yet written
  std::string to_client;
  bool client_spoke = false;
  bool pending = true;     // the coordinator has not answered the client yet
  clock::time_point deadline;
  bool closed = false;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what `fd` has into `into`; false on end of stream or an error.
bool read_into(int fd, std::string& into) {
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      into.append(buffer, static_cast<std::size_t>(n));
      if (into.size() >= kBufferCap) return true;
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// Writes what it can of `from` to `fd`; false on an error.
bool write_from(int fd, std::string& from) {
  while (!from.empty()) {
    const ssize_t n = ::send(fd, from.data(), from.size(), MSG_NOSIGNAL);
    if (n > 0) {
      from.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

std::string address_text(const sockaddr_storage& address) {
  char host[NI_MAXHOST] = "?";
  ::getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof address, host, sizeof host,
                nullptr, 0, NI_NUMERICHOST);
  return host;
}

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(port);
  target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(fd);
  return fd;
}

}  // namespace

HandshakeGate::HandshakeGate(const std::string& host, std::uint16_t port,
                             std::uint16_t target_port)
    : target_port_(target_port) {
  const std::string where = host + ":" + std::to_string(port);
  listen_fd_ = util::open_tcp_listener(host, port, 512, port_);
  set_nonblocking(listen_fd_);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    close_fd(listen_fd_);
    throw std::runtime_error("cannot listen on " + where + ": pipe: " + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

HandshakeGate::~HandshakeGate() {
  const char stop = 1;
  [[maybe_unused]] const auto n = ::write(wake_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  close_fd(listen_fd_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

void HandshakeGate::run() {
  std::list<Relay> relays;
  std::map<std::string, std::size_t> pending_by_source;
  auto end_relay = [&](Relay& r) {
    if (r.closed) return;
    if (r.pending) --pending_by_source[r.source];
    close_fd(r.client);
    close_fd(r.server);
    r.closed = true;
  };
  // Connections closed for not finishing the handshake in time, and refused over the cap.
  std::uint64_t timed_out = 0, refused = 0;
  std::uint64_t said_timed_out = 0, said_refused = 0;
  auto last_said = clock::now() - std::chrono::seconds(10);
  // Out of descriptors (EMFILE): the listener stays readable, so it rests a moment
  // instead of spinning.
  auto accept_again = clock::now();
  std::vector<pollfd> fds;
  std::vector<Relay*> owners;  // by fds index (null: the pipe or the listener)
  for (;;) {
    fds.clear();
    owners.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, clock::now() >= accept_again ? short{POLLIN} : short{0}, 0});
    owners.assign(2, nullptr);
    auto nearest = clock::now() + std::chrono::seconds(1);
    if (accept_again > clock::now()) nearest = std::min(nearest, accept_again);
    for (auto& r : relays) {
      short client_events = 0, server_events = 0;
      if (r.to_server.size() < kBufferCap) client_events |= POLLIN;
      if (!r.to_client.empty()) client_events |= POLLOUT;
      if (r.to_client.size() < kBufferCap) server_events |= POLLIN;
      if (!r.to_server.empty()) server_events |= POLLOUT;
      fds.push_back({r.client, client_events, 0});
      owners.push_back(&r);
      fds.push_back({r.server, server_events, 0});
      owners.push_back(&r);
      if (r.pending) nearest = std::min(nearest, r.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(nearest - clock::now());
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, wait.count())));
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;  // stopped
    if (fds[1].revents & POLLIN) {
      for (;;) {
        sockaddr_storage peer{};
        socklen_t length = sizeof peer;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            accept_again = clock::now() + std::chrono::milliseconds(100);
          break;
        }
        const std::string source = address_text(peer);
        if (pending_by_source[source] >= kPerSource || relays.size() >= kMaxConnections) {
          ::close(fd);
          ++refused;
          continue;
        }
        const int server = connect_loopback(target_port_);
        if (server < 0) {
          ::close(fd);
          continue;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Relay r;
        r.client = fd;
        r.server = server;
        r.source = source;
        r.deadline = clock::now() + kPendingTimeout;
        relays.push_back(std::move(r));
        ++pending_by_source[source];
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      Relay& r = *owners[i];
      if (r.closed || fds[i].revents == 0) continue;
      const bool is_client = fds[i].fd == r.client;
      bool ok = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (is_client) {
          const auto before = r.to_server.size();
          ok = read_into(r.client, r.to_server);
          if (r.to_server.size() > before) r.client_spoke = true;
        } else {
          const auto before = r.to_client.size();
          ok = read_into(r.server, r.to_client);
          if (r.to_client.size() > before && r.client_spoke && r.pending) {
            r.pending = false;  // the coordinator answered the client: past the handshake
            --pending_by_source[r.source];
          }
        }
      }
      // What was read goes on at once (and, at an end of stream, before the close).
      if (!write_from(r.server, r.to_server) || !write_from(r.client, r.to_client)) ok = false;
      if (!ok) end_relay(r);
    }
    const auto now = clock::now();
    for (auto& r : relays)
      if (!r.closed && r.pending && now >= r.deadline) {
        end_relay(r);
        ++timed_out;
      }
    relays.remove_if([](const Relay& r) { return r.closed; });
    for (auto i = pending_by_source.begin(); i != pending_by_source.end();)
      i = i->second == 0 ? pending_by_source.erase(i) : std::next(i);
    // A hostile source is said on the coordinator's log, at most every 5 s.
    if ((timed_out != said_timed_out || refused != said_refused) &&
        now - last_said >= std::chrono::seconds(5)) {
      std::fprintf(stderr, "[dseek coordinator] handshake gate on port %u: %llu connection(s) "
                   "closed for not finishing the handshake within %lld ms, %llu refused over "
                   "%zu pending from one address\n", static_cast<unsigned>(port_),
                   static_cast<unsigned long long>(timed_out - said_timed_out),
                   static_cast<long long>(kPendingTimeout.count()),
                   static_cast<unsigned long long>(refused - said_refused), kPerSource);
      said_timed_out = timed_out;
      said_refused = refused;
      last_said = now;
    }
  }
  for (auto& r : relays) end_relay(r);
}

}  // namespace dseek::actors
