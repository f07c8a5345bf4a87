// Implementation of child_process.hpp with fork/execve.
#include "dseek/launch/child_process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <utility>

namespace dseek::tool::launch {

namespace {

std::runtime_error system_error(const std::string& what, int error_number) {
  return std::runtime_error(what + ": " + ::strerror(error_number));
}

// Closes the fds it holds unless released; spawn() throws from several places.
struct FdGuard {
  int fds[6] = {-1, -1, -1, -1, -1, -1};
  ~FdGuard() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int release(int index) { return std::exchange(fds[index], -1); }
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// What the child does between fork and exec: only async-signal-safe calls, no
// allocation. On failure it reports errno through `error_fd` and exits 127.
[[noreturn]] void become_child(pid_t launcher, int null_fd, int out_fd, int err_fd, int error_fd,
                               const char* program, char* const* argv, char* const* envp) {
  auto fail = [&]() {
    int error_number = errno;
    (void)!::write(error_fd, &error_number, sizeof error_number);
    ::_exit(127);
  };
  // Its own process group: the terminal's SIGINT goes to the launcher only.
  if (::setpgid(0, 0) != 0) fail();
  // Die with the launcher; if it is already gone, the request came too late.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  if (::getppid() != launcher) ::_exit(127);
  // The launcher blocks the signals it reads from a signalfd and ignores SIGPIPE; the
  // mask and ignored dispositions would survive exec.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) fail();
  ::execve(program, argv, envp);
  fail();
  ::_exit(127);  // not reached; fail() does not return
}

}  // namespace

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return {true, WTERMSIG(wait_status)};
  return {false, WEXITSTATUS(wait_status)};
}

std::string ExitStatus::describe() const {
  if (signaled) return "killed by signal " + signal_name(value);
  return "exited with status " + std::to_string(value);
}

std::string signal_name(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);
  if (abbreviation == nullptr) return "signal " + std::to_string(signal_number);
  return std::string("SIG") + abbreviation;
}

ChildProcess ChildProcess::spawn(const SpawnRequest& request) {
  enum { null_fd, out_read, out_write, err_read, err_write, error_read };
  FdGuard fds;
  fds.fds[null_fd] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fds.fds[null_fd] < 0) throw system_error("cannot open /dev/null", errno);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw system_error("pipe2", errno);
  fds.fds[out_read] = pipe_fds[0];
  fds.fds[out_write] = pipe_fds[1];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw system_error("pipe2", errno);
  fds.fds[err_read] = pipe_fds[0];
  fds.fds[err_write] = pipe_fds[1];
  // Exec failures come back through this pipe; a successful exec closes it (CLOEXEC).
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) throw system_error("pipe2", errno);
  fds.fds[error_read] = error_pipe[0];
  FdGuard error_write;
  error_write.fds[0] = error_pipe[1];

  // Everything the child needs is built before fork: it must not allocate after it.
  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  const pid_t launcher = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw system_error("fork", errno);
  if (pid == 0) {
    become_child(launcher, fds.fds[null_fd], fds.fds[out_write], fds.fds[err_write],
                 error_write.fds[0], request.program.c_str(), argv.data(), envp.data());
  }
  // Also here, so that signal_group() works even before the child ran its setpgid.
  ::setpgid(pid, pid);
  ::close(error_write.release(0));
  ::close(fds.release(out_write));
  ::close(fds.release(err_write));

  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(fds.fds[error_read], &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw system_error("cannot start " + request.program, child_errno);
  }

  for (int index : {out_read, err_read}) {
    int flags = ::fcntl(fds.fds[index], F_GETFL);
    ::fcntl(fds.fds[index], F_SETFL, flags | O_NONBLOCK);
  }
  return ChildProcess(pid, fds.release(out_read), fds.release(err_read));
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      out_fd_(std::exchange(other.out_fd_, -1)),
      err_fd_(std::exchange(other.err_fd_, -1)),
      reaped_(std::exchange(other.reaped_, true)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    close_all();
    pid_ = std::exchange(other.pid_, -1);
    out_fd_ = std::exchange(other.out_fd_, -1);
    err_fd_ = std::exchange(other.err_fd_, -1);
    reaped_ = std::exchange(other.reaped_, true);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  kill_and_reap();
  close_all();
}

void ChildProcess::close_output(Stream stream) {
  int& fd = stream == Stream::out ? out_fd_ : err_fd_;
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void ChildProcess::close_all() {
  close_output(Stream::out);
  close_output(Stream::err);
}

void ChildProcess::signal_group(int signal_number) const {
  if (reaped_) return;
  // spawn() set the group from this side too, so it exists even if the child has not
  // run its own setpgid yet.
  ::kill(-pid_, signal_number);
}

std::optional<ExitStatus> ChildProcess::try_reap() {
  if (reaped_) return std::nullopt;
  int status = 0;
  pid_t result;
  do {
    result = ::waitpid(pid_, &status, WNOHANG);
  } while (result < 0 && errno == EINTR);
  if (result == 0) return std::nullopt;
  reaped_ = true;
  if (result < 0) return ExitStatus{true, SIGKILL};  // lost (ECHILD): count it as killed
  return ExitStatus::from_wait_status(status);
}

void ChildProcess::kill_and_reap() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);  // works on a stopped process too
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

}  // namespace dseek::tool::launch
