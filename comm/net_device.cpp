// Implementation of net_device.hpp.
#include "comm/net_device.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

namespace dseek::comm {

namespace {

// The addresses `host` stands for.
std::vector<sockaddr_storage> addresses_of(const std::string& host) {
  std::vector<sockaddr_storage> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    sockaddr_storage address{};
    std::memcpy(&address, a->ai_addr, a->ai_addrlen);
    out.push_back(address);
  }
  ::freeaddrinfo(found);
  return out;
}

// Whether `a` equals `b` (exact) or lies in b's subnet of `mask`.
bool matches(const sockaddr* a, const sockaddr* b, const sockaddr* mask, bool exact) {
  if (a->sa_family != b->sa_family) return false;
  const unsigned char *x, *y, *m = nullptr;
  size_t n;
  if (a->sa_family == AF_INET) {
    x = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr);
    y = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(b)->sin_addr);
    if (mask) m = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (a->sa_family == AF_INET6) {
    x = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
    y = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr);
    if (mask) m = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  } else {
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    const unsigned char keep = exact || m == nullptr ? 0xff : m[i];
    if ((x[i] & keep) != (y[i] & keep)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> net_device_of(const std::string& host) {
  const auto wanted = addresses_of(host);
  if (wanted.empty()) return std::nullopt;
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (bool exact : {true, false}) {
    for (ifaddrs* i = interfaces; i != nullptr && !found; i = i->ifa_next) {
      if (i->ifa_addr == nullptr) continue;
      for (const auto& address : wanted)
        if (matches(reinterpret_cast<const sockaddr*>(&address), i->ifa_addr, i->ifa_netmask, exact)) {
          found = i->ifa_name;
          break;
        }
    }
    if (found) break;
  }
  ::freeifaddrs(interfaces);
  return found;
}

}  // namespace dseek::comm
