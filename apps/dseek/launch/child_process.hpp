// One child process of `dseek launch`: started with fork/exec in its own process group
// (a terminal's Ctrl-C reaches only the launcher, which forwards it), with stdin on
// /dev/null, stdout and stderr on pipes the launcher reads, and PR_SET_PDEATHSIG so the
// child dies with a launcher that is SIGKILLed. The launcher's event loop
// (local_launcher.cpp) owns one ChildProcess per running node: it polls the two pipes,
// signals the process group, and reaps the child when SIGCHLD says so.
//
// The destructor SIGKILLs and reaps a child that was not reaped yet, so no error path
// leaves a process or a zombie behind.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace dseek::tool::launch {

// How a child ended.
struct ExitStatus {
  bool signaled = false;  // killed by a signal (value is the signal) or exited (the code)
  int value = 0;

  static ExitStatus from_wait_status(int wait_status);
  bool success() const { return !signaled && value == 0; }
  // "exited with status 3" or "killed by signal SIGKILL".
  std::string describe() const;
};

// "SIGKILL" for SIGKILL; "signal 64" for a number without a name.
std::string signal_name(int signal_number);

enum class Stream { out, err };

struct SpawnRequest {
  std::string program;                // path of the executable (not searched in PATH)
  std::vector<std::string> argv;      // argv[0] first
  std::vector<std::string> env;       // the child's whole environment, "NAME=value"
};

class ChildProcess {
 public:
  // Starts the child. Throws std::runtime_error naming the program and the reason when
  // it cannot be started (exec failures included: they come back through a pipe).
  static ChildProcess spawn(const SpawnRequest& request);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool reaped() const { return reaped_; }

  // The read end of the child's stdout or stderr (non-blocking), -1 once closed.
  int output_fd(Stream stream) const { return stream == Stream::out ? out_fd_ : err_fd_; }
  void close_output(Stream stream);

  // Sends `signal_number` to the child's process group (reaching anything it started
  // too). Does nothing once reaped: the group id could then belong to someone else.
  void signal_group(int signal_number) const;

  // waitpid without blocking: the status once the child ended, else nullopt.
  std::optional<ExitStatus> try_reap();

 private:
  ChildProcess(pid_t pid, int out_fd, int err_fd)
      : pid_(pid), out_fd_(out_fd), err_fd_(err_fd), reaped_(false) {}
  void kill_and_reap();
  void close_all();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = true;  // a moved-from or empty object has nothing to reap
};

}  // namespace dseek::tool::launch
