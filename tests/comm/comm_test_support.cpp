// Implementation of comm_test_support.hpp: one thread per rank, each running the rank
// program through run_process (which kills the process group on timeout).
#include "comm_test_support.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "support/test_paths.hpp"

namespace dseek::comm::test {

bool RanksResult::all_ok() const {
  return std::all_of(ranks.begin(), ranks.end(), [](auto& r) { return r.exit_code == 0 && !r.timed_out; });
}

std::string RanksResult::report() const {
  std::string s;
  for (size_t r = 0; r < ranks.size(); ++r) {
    s += "--- rank " + std::to_string(r) + ": exit " + std::to_string(ranks[r].exit_code) +
         (ranks[r].timed_out ? " (timed out)" : "") + "\n" + ranks[r].output;
  }
  return s;
}

RanksResult run_ranks(int n, const std::string& scenario, const std::vector<std::string>& extra,
                      std::chrono::milliseconds timeout) {
  dseek::testing::ScratchDir dir("comm-" + scenario);
  const std::string program = (dseek::testing::binary_dir() / "bin" / "dseek_comm_rank").string();
  const bool has_bootstrap = std::find(extra.begin(), extra.end(), "--bootstrap") != extra.end();
  RanksResult result;
  result.ranks.resize(static_cast<size_t>(n));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> argv{program, "--rank", std::to_string(r), "--size", std::to_string(n), "--scenario", scenario};
    if (!has_bootstrap) {
      argv.push_back("--bootstrap");
      argv.push_back("file:" + dir.path().string());
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    threads.emplace_back([&result, r, argv, timeout] {
      result.ranks[static_cast<size_t>(r)] = dseek::testing::run_process(argv, timeout);
    });
  }
  for (auto& t : threads) t.join();
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return result;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace dseek::comm::test
