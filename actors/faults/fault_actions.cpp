// Implementation of fault_actions.hpp.
#include "actors/faults/fault_actions.hpp"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <stdexcept>

#include <caf/actor_system.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/metrics/event_log.hpp"

namespace dseek::actors {

namespace {

// The actors crash_actor can name, and where each is registered.
struct CrashableActor {
  const char* name;
  caf::atom_value registered_as;
};
constexpr CrashableActor kCrashable[] = {
    {"health_monitor", names::health_monitor},   {"metrics_exporter", names::metrics_exporter},
    {"membership", names::membership},           {"fault_injector", names::fault_injector},
    {"worker", names::worker},
    {"data_prefetcher", names::data_prefetcher},
    // The first of the worker group's gradient_shards (names::gradient_shard(0)).
    {"gradient_shard", caf::atom("dsshard0")},
    // A pipeline or tensor-parallel job's stage (refused elsewhere by check_supported).
    {"pipeline_stage", names::pipeline_stage},
    // The node actor itself (embedded_node.hpp): its whole tree goes with it, and the
    // node's process (dseek-node: exit 1) or host application restarts it.
    {"node", names::node},
};

// A crash_actor target: the actor's name and, for a worker group's actor, the group's
// local rank ("worker@1"; no "@": group 0). local_rank is -1 when the suffix is no number.
struct CrashTarget {
  std::string actor;
  int64_t local_rank = 0;
};

CrashTarget parse_target(const std::string& target) {
  const auto at = target.find('@');
  if (at == std::string::npos) return {target, 0};
  const std::string digits = target.substr(at + 1);
  const bool number = !digits.empty() && digits.size() <= 2 &&
                      digits.find_first_not_of("0123456789") == std::string::npos;
  return {target.substr(0, at), number ? std::stoll(digits) : -1};
}

// The actors a node runs once per worker group (the data_prefetcher is the node
// supervisor's child, but serves one group).
bool per_worker_group(const std::string& actor) {
  return actor == "worker" || actor == "gradient_shard" || actor == "data_prefetcher" ||
         actor == "pipeline_stage";
}

caf::atom_value registry_name(const std::string& target) {
  const CrashTarget parsed = parse_target(target);
  const int local_rank = static_cast<int>(parsed.local_rank);
  if (parsed.actor == "worker") return names::worker_of(local_rank);
  if (parsed.actor == "gradient_shard") return names::gradient_shard(0, local_rank);
  if (parsed.actor == "data_prefetcher") return names::data_prefetcher_of(local_rank);
  if (parsed.actor == "pipeline_stage") return names::pipeline_stage_of(local_rank);
  for (const auto& known : kCrashable)
    if (parsed.actor == known.name) return known.registered_as;
  return names::worker;  // unreachable: check_fault_targets() refused other names at start
}

// Stops this process; a forked child (it only sleeps and signals: safe after fork in a
// threaded process) continues it after `seconds`.
void stop_process(double seconds) {
  pid_t waker = -1;
  if (seconds >= 0) {
    const pid_t parent = ::getpid();
    waker = ::fork();
    if (waker == 0) {
      struct timespec pause;
      pause.tv_sec = static_cast<time_t>(seconds);
      pause.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
      while (::nanosleep(&pause, &pause) != 0) {
      }
      ::kill(parent, SIGCONT);
      ::_exit(0);
    }
  }
  ::raise(SIGSTOP);
  // Continued: reap the waker, which exits right after its SIGCONT (else it stays a
  // zombie for the rest of the node's life). Continued early by someone else, this
  // (the hanging) thread waits out the waker.
  if (waker > 0) {
    while (::waitpid(waker, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace

const std::vector<std::string>& crashable_actors() {
  static const std::vector<std::string> list = [] {
    std::vector<std::string> names;
    for (const auto& known : kCrashable) names.emplace_back(known.name);
    return names;
  }();
  return list;
}

void check_fault_targets(const std::vector<config::FaultSpec>& faults, int64_t local_ranks) {
  for (size_t i = 0; i < faults.size(); ++i) {
    if (faults[i].kind != config::FaultKind::crash_actor) continue;
    const CrashTarget target = parse_target(faults[i].actor);
    bool known = false;
    std::string all;
    for (const auto& name : crashable_actors()) {
      known = known || name == target.actor;
      all += (all.empty() ? "" : ", ") + name;
    }
    const std::string which = "faults[" + std::to_string(i) + "].actor = \"" + faults[i].actor;
    if (!known)
      throw std::invalid_argument(which + "\": no such actor in a node (known: " + all +
                                  "; worker, gradient_shard, data_prefetcher and pipeline_stage take @<local "
                                  "rank>)");
    const bool suffixed = faults[i].actor.find('@') != std::string::npos;
    if (suffixed && !per_worker_group(target.actor))
      throw std::invalid_argument(which + "\": only worker, gradient_shard, data_prefetcher "
                                  "and pipeline_stage are one per worker group (@<local "
                                  "rank>)");
    if (target.local_rank < 0 || target.local_rank >= local_ranks)
      throw std::invalid_argument(which + "\": the local rank must be a number below "
                                  "cluster.gpus_per_node (" + std::to_string(local_ranks) + ")");
  }
}

FaultActions::FaultActions(caf::actor_system& sys, std::shared_ptr<metrics::EventLog> events)
    : sys_(sys), events_(std::move(events)) {}

void FaultActions::fire(const config::FaultSpec& fault, const std::string& trigger) {
  util::JsonLine line;
  line.add("kind", config::name_of(fault.kind)).add("trigger", trigger);
  if (fault.kind == config::FaultKind::hang) line.add("seconds", fault.seconds);
  if (fault.kind == config::FaultKind::crash_actor) line.add("actor", fault.actor);
  if (fault.kind == config::FaultKind::drop_messages) line.add("fraction", fault.fraction);
  if (fault.kind == config::FaultKind::slow) line.add("ms", fault.ms);
  events_->emit("fault_injected", line);
  std::fprintf(stderr, "dseek-node: injecting fault %s (%s)\n", config::name_string(fault.kind).c_str(),
               trigger.c_str());
  std::fflush(stderr);
  if (fault.kind == config::FaultKind::kill) {
    ::raise(SIGKILL);
  } else if (fault.kind == config::FaultKind::hang) {
    stop_process(fault.seconds);
  } else if (fault.kind == config::FaultKind::crash_actor) {
    names::send_to(sys_, registry_name(fault.actor), crash_atom::value);
  } else if (fault.kind == config::FaultKind::drop_messages) {
    drop_heartbeats_->store(fault.fraction);
  } else if (fault.kind == config::FaultKind::slow) {
    slow_ms_ += fault.ms;
  } else if (fault.kind == config::FaultKind::corrupt_gradient) {
    Corruption& corruption = corrupt_[static_cast<size_t>(fault.where)];
    (fault.every_step ? corruption.always : corruption.next) = true;
  } else if (fault.kind == config::FaultKind::fail_connect) {
    fail_connect_next_ = true;
  }
}

void FaultActions::sleep_if_slow() {
  if (const int64_t ms = slow_ms_.load(); ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

namespace {
// One flipped exponent bit: the kind of error ECC-less memory or a faulty unit makes.
void flip_a_bit(float* grads, size_t count) {
  uint32_t bits;
  std::memcpy(&bits, &grads[count / 2], sizeof bits);
  bits ^= 1u << 27;
  std::memcpy(&grads[count / 2], &bits, sizeof bits);
}
}  // namespace

void FaultActions::corrupt_if_due(config::FaultWhere where, float* grads, size_t count) {
  Corruption& corruption = corrupt_[static_cast<size_t>(where)];
  if (count > 0 && (corruption.always.load() || corruption.next.exchange(false))) flip_a_bit(grads, count);
}

}  // namespace dseek::actors
