// The data plane's interface (comm/net_device.hpp) and UCX bound to it: the interface
// that holds an address, and a UCX worker created for "lo" that listens on loopback
// only. Before issue 28 a local job's UCX listened on every interface of the host (its
// TCP transport opened a listening socket on eth0's address too).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

#include "comm/net_device.hpp"
#include "comm/ucx/ucx_transport.hpp"

namespace {

// The first IPv4 address of an interface that is up and not loopback, with its name.
std::optional<std::pair<std::string, std::string>> external_ipv4() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return std::nullopt;
  std::optional<std::pair<std::string, std::string>> found;
  for (ifaddrs* i = all; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = std::make_pair(std::string(i->ifa_name), std::string(text));
  }
  ::freeifaddrs(all);
  return found;
}

// The local IPv4 addresses (as /proc/net/tcp writes them: hex, host order of the kernel)
// on which this process has a listening TCP socket.
std::set<std::string> listening_addresses_of_this_process() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<std::string> addresses;
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state == "0A" && inodes.count(inode) != 0) addresses.insert(local.substr(0, 8));
  }
  return addresses;
}

}  // namespace

TEST_CASE("net device: the interface that holds an address", "[comm][security]") {
  CHECK(dseek::comm::net_device_of("127.0.0.1") == std::optional<std::string>("lo"));
  CHECK(dseek::comm::net_device_of("127.0.0.2") == std::optional<std::string>("lo"));  // lo's subnet
  CHECK(dseek::comm::net_device_of("localhost") == std::optional<std::string>("lo"));
  CHECK_FALSE(dseek::comm::net_device_of("203.0.113.7").has_value());  // TEST-NET-3: no interface
  CHECK_FALSE(dseek::comm::net_device_of("no-such-host.invalid").has_value());
  if (const auto external = external_ipv4()) {
    INFO(external->first << " " << external->second);
    CHECK(dseek::comm::net_device_of(external->second) == std::optional<std::string>(external->first));
  }
}

TEST_CASE("net device: a UCX worker for lo listens on loopback only", "[comm][security]") {
  const auto external = external_ipv4();
  if (std::getenv("UCX_NET_DEVICES") != nullptr || !external) {
    WARN("not checked: UCX_NET_DEVICES is set (it wins), or no interface but loopback here");
    return;
  }
  // The worker opens UCX's TCP transport on every interface it may use, each with a
  // listening socket: those show where the worker can be reached.
  const auto before = listening_addresses_of_this_process();
  {
    dseek::comm::UcxTransport transport(0, 2, false, "lo");
    const auto now = listening_addresses_of_this_process();
    std::set<std::string> opened;
    for (const auto& address : now)
      if (before.count(address) == 0) opened.insert(address);
    INFO("external interface " << external->first << " " << external->second);
    REQUIRE_FALSE(opened.empty());  // it listens somewhere
    for (const auto& address : opened) {
      INFO("listening on " << address << " (hex, /proc/net/tcp)");
      CHECK(address == "0100007F");  // 127.0.0.1
    }
  }
}
