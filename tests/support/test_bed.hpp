// The namespace test bed (scripts/hosts/testbed.sh) from a test: N hosts, each a network
// namespace on a private bridge run under its own UTS, mount (/dev/shm), IPC and PID
// namespaces, made for the life of a TestBed object and removed when it goes (also when
// a REQUIRE fails: the destructor runs `down`, which kills whatever still runs as a
// host). Root only: without root the test process exits 77, which ctest reports as
// skipped (SKIP_RETURN_CODE). The file systems stay those of this machine, so a folder
// under /tmp is one folder every host sees, as a cluster file system would be.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

inline std::string testbed() { return (source_dir() / "scripts/hosts/testbed.sh").string(); }

// A test bed of `hosts` hosts for the life of the object; removed when it goes. Its ID is
// `tag` and this process's pid (at most 6 characters), so test processes do not share one.
class TestBed {
 public:
  explicit TestBed(int hosts, char tag = 't') : id_(tag + std::to_string(::getpid() % 100000)) {
    using namespace std::chrono_literals;
    if (::geteuid() != 0) {  // ctest reports exit 77 as skipped (SKIP_RETURN_CODE)
      std::printf("SKIPPED: the test bed makes network namespaces, which needs root (euid %u)\n",
                  static_cast<unsigned>(::geteuid()));
      std::fflush(stdout);
      std::exit(77);
    }
    const auto check = run_process({testbed(), "check"}, 30s);
    if (check.exit_code != 0) {  // no network namespaces here (a container without them)
      std::printf("SKIPPED: no test bed here: %s\n", check.output.c_str());
      std::fflush(stdout);
      std::exit(77);
    }
    run_process({testbed(), "down", id_}, 60s);  // a leftover of an earlier crash
    const auto up = run_process({testbed(), "up", id_, std::to_string(hosts)}, 60s);
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
    std::istringstream lines(up.output);
    for (std::string name, address; lines >> name >> address;) addresses_.push_back(address);
    REQUIRE(static_cast<int>(addresses_.size()) == hosts);
  }
  ~TestBed() { run_process({testbed(), "down", id_}, std::chrono::seconds(60)); }
  TestBed(const TestBed&) = delete;
  TestBed& operator=(const TestBed&) = delete;

  const std::string& id() const { return id_; }
  const std::string& address(int host) const { return addresses_.at(static_cast<size_t>(host)); }
  // The host name `host`'s processes see (testbed.sh exec sets it).
  std::string hostname(int host) const { return "dseek-" + id_ + "-h" + std::to_string(host); }
  // `argv` run as host `host`.
  std::vector<std::string> as_host(int host, const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {testbed(), "exec", id_, std::to_string(host)};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  // What `host`'s processes started from now on may compute: `percent` of one CPU
  // (testbed.sh cpu: a cgroup with a 10 ms period).
  void limit_cpu(int host, int percent) const {
    const auto limited =
        run_process({testbed(), "cpu", id_, std::to_string(host), std::to_string(percent)},
                    std::chrono::seconds(30));
    INFO(limited.output);
    REQUIRE(limited.exit_code == 0);
  }
  // Bytes host `host` sent onto the bridge (its link's root-side end received them).
  uint64_t bytes_sent(int host) const {
    std::ifstream in("/sys/class/net/dsk" + id_ + "v" + std::to_string(host) + "/statistics/rx_bytes");
    uint64_t bytes = 0;
    in >> bytes;
    return bytes;
  }
  // The pids (as this machine's root PID namespace numbers them) of host `host`'s
  // processes whose command name (/proc/PID/comm) is `comm`.
  std::vector<pid_t> processes(int host, const std::string& comm) const {
    using namespace std::chrono_literals;
    const auto listed =
        run_process({"ip", "netns", "pids", "dseek-" + id_ + "-h" + std::to_string(host)}, 30s);
    std::vector<pid_t> found;
    std::istringstream pids(listed.output);
    for (long pid = 0; pids >> pid;) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      if (std::getline(in, name) && name == comm) found.push_back(static_cast<pid_t>(pid));
    }
    return found;
  }

 private:
  std::string id_;
  std::vector<std::string> addresses_;
};

}  // namespace dseek::testing
