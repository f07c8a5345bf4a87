// Running the built binaries from tests as a user would: a command line, a bounded
// wait, and the captured output. A process that outlives its timeout is killed (its
// whole process group), so a hung binary fails the test instead of hanging ctest.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dseek::testing {

struct ProcessResult {
  int exit_code = -1;     // exit status, or 128 + signal number
  bool timed_out = false;
  std::string output;     // stdout and stderr together
};

ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout,
                          const std::vector<std::string>& extra_env = {});

}  // namespace dseek::testing
