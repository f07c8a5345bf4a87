// A child process the test keeps running while it does other things (unlike
// tests/support/process.hpp's run_process, which waits): fork/exec into its
// own process group, output to a file, signals to the whole group, waits with
// a timeout. The destructor kills the group (SIGKILL) and reaps, so no child
// outlives a failed test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dseek::test {

class SpawnedProcess {
public:
  SpawnedProcess() = default;
  // Starts argv[0] (searched in PATH) with stdout and stderr appended to
  // `output_file` (/dev/null if empty) and `extra_env` ("K=V") added. Throws
  // std::runtime_error if fork fails; an exec failure exits the child with 127.
  static SpawnedProcess start(const std::vector<std::string>& argv,
                              const std::string& output_file = "",
                              const std::vector<std::string>& extra_env = {});

  SpawnedProcess(SpawnedProcess&& other) noexcept;
  SpawnedProcess& operator=(SpawnedProcess&& other) noexcept;
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;
  ~SpawnedProcess();

  pid_t pid() const { return pid_; }
  // Started and not yet reaped.
  bool running();
  // Sends `sig` to the process group. No-op once reaped.
  void signal(int sig);
  // Waits up to `timeout` for the exit; the exit code (128 + signal if
  // killed by one), or nullopt if it is still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // SIGKILL to the group (SIGCONT too, for a stopped one) and reap.
  // Returns the exit code.
  int kill();

private:
  bool reap(int options); // true once the child is reaped
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
};

} // namespace dseek::test
