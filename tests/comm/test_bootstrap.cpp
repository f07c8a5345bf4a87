// Bootstraps: the TCP rendezvous builds a working communicator; the file and TCP
// bootstraps exchange contributions in-process and time out when a rank is missing.
#include <thread>

#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/bootstrap/tcp_bootstrap.hpp"
#include "comm/types.hpp"
#include "expect_ranks.hpp"
#include "support/test_paths.hpp"

using namespace dseek::comm;
using namespace dseek::comm::test;

TEST_CASE("tcp bootstrap connects 3 ranks for all_reduce", "[comm][bootstrap]") {
  const int port = free_port();
  expect_scenario(3, "all_reduce_async", {"--bootstrap", "tcp:" + std::to_string(port)});
}

TEST_CASE("tcp bootstrap exchanges contributions twice", "[comm][bootstrap]") {
  TcpBootstrap root("127.0.0.1", 0, 0, 3);
  const int port = root.port();
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> threads;
  for (int r = 1; r < 3; ++r)
    threads.emplace_back([&, r] {
      TcpBootstrap b("127.0.0.1", port, r, 3);
      got[static_cast<size_t>(r)] = b.all_gather("rank" + std::to_string(r), std::chrono::seconds(10));
      b.all_gather("again", std::chrono::seconds(10));
    });
  got[0] = root.all_gather("rank0", std::chrono::seconds(10));
  CHECK(root.all_gather("again", std::chrono::seconds(10)) == std::vector<std::string>{"again", "again", "again"});
  for (auto& t : threads) t.join();
  for (auto& g : got) CHECK(g == std::vector<std::string>{"rank0", "rank1", "rank2"});
}

TEST_CASE("file bootstrap times out when a rank is missing", "[comm][bootstrap]") {
  dseek::testing::ScratchDir dir("comm-fileboot");
  FileBootstrap b(dir.path(), 0, 2);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(b.all_gather("x", std::chrono::milliseconds(200)), CommError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("pack and unpack strings round trip", "[comm][bootstrap]") {
  const std::vector<std::string> parts{"", std::string("a\0b", 3), "host"};
  CHECK(unpack_strings(pack_strings(parts)) == parts);
}
