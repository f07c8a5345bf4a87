#include "spawned_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dseek::test {

SpawnedProcess SpawnedProcess::start(const std::vector<std::string>& argv,
                                     const std::string& output_file,
                                     const std::vector<std::string>& extra_env) {
  if (argv.empty())
    throw std::runtime_error("SpawnedProcess::start: empty argv");
  // Prepare everything before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string out = output_file.empty() ? std::string{"/dev/null"} : output_file;
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("SpawnedProcess::start: cannot open " + out);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw std::runtime_error("SpawnedProcess::start: fork failed");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0)
      ::dup2(devnull, 0);
    for (const auto& kv : extra_env)
      ::putenv(const_cast<char*>(kv.c_str()));
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also from the parent: no race with an early signal
  ::close(fd);
  SpawnedProcess p;
  p.pid_ = pid;
  return p;
}

SpawnedProcess::SpawnedProcess(SpawnedProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), reaped_(other.reaped_),
      exit_code_(other.exit_code_) {}

SpawnedProcess& SpawnedProcess::operator=(SpawnedProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0)
      kill();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    exit_code_ = other.exit_code_;
  }
  return *this;
}

SpawnedProcess::~SpawnedProcess() {
  if (pid_ > 0)
    kill();
}

bool SpawnedProcess::reap(int options) {
  if (pid_ <= 0 || reaped_)
    return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, options);
  } while (r < 0 && errno == EINTR);
  if (r == 0)
    return false;
  reaped_ = true;
  if (r < 0)
    exit_code_ = -1;
  else if (WIFEXITED(status))
    exit_code_ = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    exit_code_ = 128 + WTERMSIG(status);
  return true;
}

bool SpawnedProcess::running() {
  return pid_ > 0 && !reap(WNOHANG);
}

void SpawnedProcess::signal(int sig) {
  if (pid_ > 0 && !reaped_)
    ::kill(-pid_, sig);
}

std::optional<int> SpawnedProcess::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (reap(WNOHANG))
      return exit_code_;
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int SpawnedProcess::kill() {
  if (pid_ <= 0)
    return exit_code_;
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(-pid_, SIGCONT);
    reap(0);
  } else {
    ::kill(-pid_, SIGKILL); // anything the child left in its group
  }
  return exit_code_;
}

} // namespace dseek::test
