// The data plane's interface (comm/net_device.hpp) and UCX bound to it: the interface
// that holds an address, and a UCX worker created for "lo" that listens on loopback
// only. Before issue 28 a local job's UCX listened on every interface of the host (its
// TCP transport opened a listening socket on eth0's address too).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/net_device.hpp"
#include "comm/ucx/ucx_transport.hpp"
#include "support/external_address.hpp"

namespace {

using dseek::testing::external_ipv4;

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
    INFO(external->interface << " " << external->ipv4);
    CHECK(dseek::comm::net_device_of(external->ipv4) == std::optional<std::string>(external->interface));
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
    INFO("external interface " << external->interface << " " << external->ipv4);
    REQUIRE_FALSE(opened.empty());  // it listens somewhere
    for (const auto& address : opened) {
      INFO("listening on " << address << " (hex, /proc/net/tcp)");
      CHECK(address == "0100007F");  // 127.0.0.1
    }
  }
}
