// Implementation of local_launcher.hpp.
#include "dseek/launch/local_launcher.hpp"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "dseek/launch/child_process.hpp"
#include "dseek/launch/job_console.hpp"
#include "dseek/launch/line_prefixer.hpp"
#include "runtime/util/exit_codes.hpp"

extern char** environ;

namespace dseek::tool::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::string plural(int count, const char* word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

// The environment of a child: the launcher's, with `overrides` ("NAME=value") replacing
// or adding variables.
std::vector<std::string> child_environment(const std::vector<std::string>& overrides) {
  auto name_of = [](std::string_view assignment) {
    return assignment.substr(0, assignment.find('='));
  };
  std::vector<std::string> env;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    std::string_view assignment(*variable);
    bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const auto& o) {
      return name_of(o) == name_of(assignment);
    });
    if (!overridden) env.emplace_back(assignment);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

struct NodeSlot {
  explicit NodeSlot(int node_id)
      : id(node_id),
        out("[node " + std::to_string(node_id) + "] "),
        err("[node " + std::to_string(node_id) + "] ") {}

  int id;
  int restarts = 0;
  bool finished = false;  // exited 0: done, never restarted
  bool given_up = false;  // failed past max_restarts; the job went on without it
  std::optional<ChildProcess> child;
  LinePrefixer out, err;

  LinePrefixer& prefixer(Stream stream) { return stream == Stream::out ? out : err; }
};

// lagging: the job finished on some nodes and the rest did not follow (hung, cut off).
// permanent: a node failed in a way no restart cures (exit_code::permanent or usage).
enum class StopReason { none, node_failed, permanent, timed_out, signaled, lagging };

class Launcher {
 public:
  explicit Launcher(const LaunchPlan& plan)
      : plan_(plan), console_(plan.progress_bar, plan.coordinator_node) {
    for (int id = 0; id < plan.nodes; ++id) slots_.emplace_back(id);
  }
  ~Launcher() {
    if (signal_fd_ >= 0) ::close(signal_fd_);
  }
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  int run();

 private:
  // The launcher's own messages go to stderr, one write per line.
  void say(const std::string& message) { console_.message("[launch] " + message + "\n"); }
  void watch_signals();
  bool start(NodeSlot& slot);
  void pump(NodeSlot& slot, Stream stream, bool drain);
  void reap_exited_children();
  void on_exit(NodeSlot& slot, ExitStatus status);
  void read_signals();
  void begin_stop(StopReason reason);
  void kill_everyone();
  void check_deadlines();
  int poll_timeout_ms() const;
  bool any_running() const;
  int exit_code() const;

  const LaunchPlan& plan_;
  JobConsole console_;
  std::vector<NodeSlot> slots_;
  int signal_fd_ = -1;
  StopReason stop_reason_ = StopReason::none;
  bool killed_by_second_signal_ = false;
  int first_signal_ = 0;  // SIGINT or SIGTERM that stopped the job
  int permanent_status_ = exit_code::permanent;  // a node's status that stopped the job
  int total_restarts_ = 0;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> kill_deadline_;
  // Once a node finished the job, the others get stop_grace to finish too.
  std::optional<Clock::time_point> finish_deadline_;
};

void Launcher::watch_signals() {
  // Blocked before the first fork, so a SIGCHLD is pending for the signalfd even if a
  // child dies at once.
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal_number : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, signal_number);
  if (::sigprocmask(SIG_BLOCK, &signals, nullptr) != 0)
    throw std::runtime_error("sigprocmask failed");
  signal_fd_ = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) throw std::runtime_error("signalfd failed");
  ::signal(SIGPIPE, SIG_IGN);
}

bool Launcher::start(NodeSlot& slot) {
  SpawnRequest request;
  request.program = plan_.node_binary;
  request.argv = node_command_line(plan_, slot.id);
  std::vector<std::string> env = plan_.extra_env;
  env.push_back("DSEEK_LAUNCH_RESTART=" + std::to_string(slot.restarts));
  request.env = child_environment(env);
  try {
    slot.child.emplace(ChildProcess::spawn(request));
    return true;
  } catch (const std::exception& error) {
    say("node " + std::to_string(slot.id) + ": " + error.what());
    return false;
  }
}

// Reads what the child wrote and passes the complete lines on. `drain` reads until the
// pipe is empty (the child was reaped: this is its last output), bounded so that a
// grandchild that keeps the pipe open and writing cannot hold the loop.
void Launcher::pump(NodeSlot& slot, Stream stream, bool drain) {
  const int fd = slot.child->output_fd(stream);
  if (fd < 0) return;
  const bool is_stdout = stream == Stream::out;
  LinePrefixer& prefixer = slot.prefixer(stream);
  auto end_stream = [&] {
    console_.node_output(slot.id, is_stdout, prefixer.flush());
    slot.child->close_output(stream);
  };
  char buffer[65536];
  for (int reads = 0; reads < (drain ? 64 : 1);) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) break;
    if (got <= 0) {  // end of stream (an error counts as one)
      end_stream();
      return;
    }
    ++reads;
    console_.node_output(slot.id, is_stdout, prefixer.feed({buffer, static_cast<size_t>(got)}));
  }
  // A reaped child's stream ends here even if a process it started still holds the pipe.
  if (drain) end_stream();
}

void Launcher::reap_exited_children() {
  for (auto& slot : slots_) {
    if (!slot.child) continue;
    std::optional<ExitStatus> status = slot.child->try_reap();
    if (!status) continue;
    // Its last lines are in the pipes; they come before the launcher's word on its exit.
    pump(slot, Stream::out, true);
    pump(slot, Stream::err, true);
    slot.child.reset();
    on_exit(slot, *status);
  }
}

void Launcher::on_exit(NodeSlot& slot, ExitStatus status) {
  const std::string node = "node " + std::to_string(slot.id);
  if (!plan_.node_args.empty()) {  // every node to its own end (LaunchPlan::node_args)
    say(node + " " + status.describe());
    (status.success() ? slot.finished : slot.given_up) = true;
    return;
  }
  // 130 / 143: a node that a signal stopped orderly (this launcher's SIGTERM, or
  // someone's): it is done, never restarted.
  const bool stopped_orderly = !status.signaled && (status.value == exit_code::interrupted ||
                                                    status.value == exit_code::terminated);
  if (status.success() || stopped_orderly) {
    slot.finished = true;
    say(node + " " + status.describe());
    if (!finish_deadline_ && stop_reason_ == StopReason::none)
      finish_deadline_ = Clock::now() + plan_.stop_grace;
    return;
  }
  if (stop_reason_ != StopReason::none) {  // stopping: no restarts
    say(node + " " + status.describe());
    return;
  }
  // Evicted by the SDC audit: never restarted, and the job goes on without it (below).
  const bool evicted = !status.signaled && status.value == exit_code::evicted;
  if (!evicted && !status.signaled && !exit_code::worth_a_restart(status.value)) {
    say(node + " " + status.describe() + (status.value == exit_code::permanent
                                               ? " (a config, data, device or checkpoint error)"
                                               : " (a bad command line)") +
        ": no restart can cure it; stopping the job");
    slot.given_up = true;
    permanent_status_ = status.value;
    begin_stop(StopReason::permanent);
    return;
  }
  if (evicted) {
    say(node + " " + status.describe() + " (the SDC audit found it computing wrong gradients): "
        "not restarted");
  } else if (slot.restarts < plan_.max_restarts) {
    ++slot.restarts;
    ++total_restarts_;
    say(node + " " + status.describe() + "; restarting (" + std::to_string(slot.restarts) + "/" +
        std::to_string(plan_.max_restarts) + ")");
    if (start(slot)) return;
  } else {
    say(node + " " + status.describe());
  }
  // An evicted node that runs the coordinator stays until the job is done (it stops
  // training and coordinates the others): it exits after them, its part done.
  if (evicted && slot.id == plan_.coordinator_node &&
      std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s.finished; })) {
    slot.finished = true;
    return;
  }
  slot.given_up = true;
  const auto alive = std::count_if(slots_.begin(), slots_.end(),
                                   [](const auto& s) { return !s.given_up; });
  if (slot.id != plan_.coordinator_node && alive >= plan_.min_nodes) {
    say(node + " failed " + plural(slot.restarts + 1, "time") + "; the job goes on with " +
        plural(static_cast<int>(alive), "node") +
        (plan_.min_nodes == 0 ? std::string(" (elastic.min_nodes = 0, no consent to shrink: "
                                            "the job will end with exit 3)")
                              : " (elastic.min_nodes = " + std::to_string(plan_.min_nodes) + ")"));
    return;
  }
  say(node + " failed " + plural(slot.restarts + 1, "time") + "; stopping the job" +
      (slot.id == plan_.coordinator_node ? " (it runs the coordinator)" : ""));
  begin_stop(StopReason::node_failed);
}

void Launcher::read_signals() {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int signal_number = static_cast<int>(info.ssi_signo);
    if (signal_number == SIGCHLD) continue;  // reaped below, whatever woke the loop
    if (stop_reason_ == StopReason::none) {
      first_signal_ = signal_number;
      say("stopping (" + signal_name(signal_number) + "); a second signal kills");
      begin_stop(StopReason::signaled);
    } else if (!killed_by_second_signal_) {
      say("second signal (" + signal_name(signal_number) + "): killing every node");
      killed_by_second_signal_ = true;
      kill_everyone();
    }
  }
  reap_exited_children();
}

// Asks every node to stop (SIGTERM: a dseek-node finishes its step and exits 0) and
// gives them stop_grace before SIGKILL.
void Launcher::begin_stop(StopReason reason) {
  stop_reason_ = reason;
  job_deadline_.reset();
  for (auto& slot : slots_)
    if (slot.child) slot.child->signal_group(SIGTERM);
  kill_deadline_ = Clock::now() + plan_.stop_grace;
}

void Launcher::kill_everyone() {
  kill_deadline_.reset();
  for (auto& slot : slots_)
    if (slot.child) slot.child->signal_group(SIGKILL);  // works on a stopped process too
}

void Launcher::check_deadlines() {
  const auto now = Clock::now();
  if (job_deadline_ && now >= *job_deadline_) {
    say("job timed out after " + seconds_text(plan_.timeout) + "; stopping every node");
    begin_stop(StopReason::timed_out);
  }
  if (finish_deadline_ && now >= *finish_deadline_ && stop_reason_ == StopReason::none) {
    std::string left;
    for (const auto& slot : slots_)
      if (slot.child) left += (left.empty() ? "" : ", ") + std::to_string(slot.id);
    finish_deadline_.reset();
    if (!left.empty()) {
      say("node(s) " + left + " still running " + seconds_text(plan_.stop_grace) +
          " after the job finished; stopping them");
      begin_stop(StopReason::lagging);
    }
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    std::string left;
    for (const auto& slot : slots_)
      if (slot.child) left += (left.empty() ? "" : ", ") + std::to_string(slot.id);
    say("node(s) " + left + " still running " + seconds_text(plan_.stop_grace) +
        " after SIGTERM; sending SIGKILL");
    kill_everyone();
  }
}

int Launcher::poll_timeout_ms() const {
  std::optional<Clock::time_point> nearest;
  for (const auto& deadline : {job_deadline_, kill_deadline_, finish_deadline_})
    if (deadline && (!nearest || *deadline < *nearest)) nearest = deadline;
  if (!nearest) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*nearest - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
}

bool Launcher::any_running() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot.child.has_value(); });
}

int Launcher::exit_code() const {
  if (killed_by_second_signal_) return kJobKilled;
  if (stop_reason_ == StopReason::timed_out) return kJobTimedOut;
  if (stop_reason_ == StopReason::node_failed) return kJobFailed;
  if (stop_reason_ == StopReason::permanent) return permanent_status_;
  if (!plan_.node_args.empty()) {
    if (stop_reason_ == StopReason::signaled) return 128 + first_signal_;
    return std::all_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot.finished; })
               ? kJobSucceeded
               : kJobFailed;
  }
  // The job succeeded when the coordinator node and at least min_nodes nodes finished
  // it; a node given up or stopped after the others finished did not fail it.
  const auto finished = std::count_if(slots_.begin(), slots_.end(),
                                      [](const auto& slot) { return slot.finished; });
  const bool coordinator_finished = slots_[static_cast<size_t>(plan_.coordinator_node)].finished;
  // Stopped orderly by the user: 128 + the signal, as the nodes exit.
  if (stop_reason_ == StopReason::signaled) {
    if (finished != static_cast<long>(slots_.size())) return kJobFailed;
    return 128 + first_signal_;  // 130 SIGINT, 143 SIGTERM, 129 SIGHUP
  }
  return coordinator_finished && finished >= plan_.min_nodes ? kJobSucceeded : kJobFailed;
}

int Launcher::run() {
  watch_signals();
  if (plan_.timeout.count() > 0) job_deadline_ = Clock::now() + plan_.timeout;
  if (plan_.node_args.empty()) {
    say("starting " + plural(plan_.nodes, "node") + " of " + plan_.node_binary + " (config " +
        plan_.config_path + ", coordinator " + plan_.coordinator + ", run dir " +
        plan_.run_dir + ")");
  } else {
    std::string command = plan_.node_binary;
    for (const auto& arg : plan_.node_args) command += " " + arg;
    say("starting " + plural(plan_.nodes, "node") + " of " + command + " --nodes " +
        std::to_string(plan_.nodes) + " --node-id K");
  }
  for (auto& slot : slots_) {
    if (!start(slot)) {
      say("node " + std::to_string(slot.id) + " could not start; stopping the job");
      begin_stop(StopReason::node_failed);
      break;
    }
  }

  struct Source {
    NodeSlot* slot;
    Stream stream;
  };
  std::vector<pollfd> fds;
  std::vector<Source> sources;
  while (any_running()) {
    fds.assign(1, pollfd{signal_fd_, POLLIN, 0});
    sources.clear();
    for (auto& slot : slots_) {
      if (!slot.child) continue;
      for (Stream stream : {Stream::out, Stream::err}) {
        int fd = slot.child->output_fd(stream);
        if (fd < 0) continue;
        fds.push_back(pollfd{fd, POLLIN, 0});
        sources.push_back({&slot, stream});
      }
    }
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    if (ready > 0) {
      for (size_t i = 1; i < fds.size(); ++i) {
        // A slot's child may have been reaped (and restarted) by an earlier entry.
        if (fds[i].revents == 0) continue;
        NodeSlot& slot = *sources[i - 1].slot;
        if (slot.child && slot.child->output_fd(sources[i - 1].stream) == fds[i].fd)
          pump(slot, sources[i - 1].stream, false);
      }
      if (fds[0].revents != 0) read_signals();
    }
    check_deadlines();
  }
  const int code = exit_code();
  console_.finish();
  std::string failed;
  for (const auto& slot : slots_)
    if (slot.given_up) failed += (failed.empty() ? "" : ", ") + std::to_string(slot.id);
  if (!plan_.node_args.empty() && !failed.empty())
    say("node(s) " + failed + " failed (their lines above say why)");
  say("job done: " + plural(plan_.nodes, "node") + ", " + plural(total_restarts_, "restart") +
      ", exit " + std::to_string(code));
  return code;
}

}  // namespace

std::vector<std::string> node_command_line(const LaunchPlan& plan, int node_id) {
  if (!plan.node_args.empty()) {
    std::vector<std::string> argv = {plan.node_binary};
    argv.insert(argv.end(), plan.node_args.begin(), plan.node_args.end());
    argv.insert(argv.end(), {"--nodes", std::to_string(plan.nodes), "--node-id",
                             std::to_string(node_id)});
    return argv;
  }
  std::vector<std::string> argv = {plan.node_binary,
                                   "--config", plan.config_path,
                                   "--node-id", std::to_string(node_id),
                                   "--coordinator", plan.coordinator,
                                   "--run-dir", plan.run_dir,
                                   "--set", "cluster.nodes=" + std::to_string(plan.nodes)};
  for (const auto& assignment : plan.node_sets) {
    argv.push_back("--set");
    argv.push_back(assignment);
  }
  // The job's bar is drawn from the coordinator node's step lines, one a step; the
  // other nodes' view of the same steps stays off the console.
  if (plan.progress_bar) {
    const bool draws = node_id == plan.coordinator_node;
    for (const char* assignment : draws ? std::vector<const char*>{"metrics.progress=\"plain\"",
                                                                   "metrics.log_every=1"}
                                        : std::vector<const char*>{"metrics.progress=\"off\""}) {
      argv.push_back("--set");
      argv.push_back(assignment);
    }
  }
  return argv;
}

int run_local_job(const LaunchPlan& plan) { return Launcher(plan).run(); }

}  // namespace dseek::tool::launch
