// Launching the comm rank program N times for one multi-process test, each rank a
// separate process on loopback, with a fresh rendezvous directory and a bounded wait.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace dseek::comm::test {

struct RanksResult {
  std::vector<dseek::testing::ProcessResult> ranks;
  std::chrono::milliseconds elapsed{0};
  bool all_ok() const;
  std::string report() const;  // every rank's exit code and output, for failure messages
};

// Runs `scenario` on `n` ranks (file bootstrap in a scratch dir unless `extra` sets
// --bootstrap). Every process is killed after `timeout`.
RanksResult run_ranks(int n, const std::string& scenario, const std::vector<std::string>& extra = {},
                      std::chrono::milliseconds timeout = std::chrono::seconds(90));

// A TCP port that was free a moment ago (bind to port 0, read it, close).
int free_port();

}  // namespace dseek::comm::test
