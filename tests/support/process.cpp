// Implementation of process.hpp with fork/exec, a pipe and poll().
#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace dseek::testing {

ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout,
                          const std::vector<std::string>& extra_env) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    for (const auto& assignment : extra_env) ::putenv(const_cast<char*>(assignment.c_str()));
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(pipe_fds[1]);
  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long>(left.count(), 200)));
    if (ready > 0) {
      ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (n <= 0) break;  // every writer closed: the process (group) is done writing
      result.output.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::kill(-pid, SIGKILL);  // nothing it started outlives the test
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace dseek::testing
