// What a supervisor supervises: one spec per child (how to start it, when to
// restart it, how long it gets to stop) and the supervisor's own settings
// (strategy, restart intensity, event listener). Local only: a factory is a
// std::function and never crosses a process boundary.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

namespace dseek::actors {

// When a child that terminated on its own is restarted (OTP's restart types).
enum class restart_policy : std::uint8_t {
  permanent, // always
  transient, // only after an abnormal exit (anything but normal / user_shutdown)
  temporary, // never; the child is removed from the supervisor when it ends
};

// Which children are restarted when one of them must be (OTP's strategies).
enum class restart_strategy : std::uint8_t {
  one_for_one,  // just that child
  one_for_all,  // all children: the others are stopped (reverse order), all restart
  rest_for_one, // that child and the ones started after it
};

std::string to_string(restart_policy x);
std::string to_string(restart_strategy x);

// Spawns a child. It runs inside the supervisor (do not block) and must
// return a live actor; throwing or returning an invalid handle is a failed
// start. Do not link the child to anything: the supervisor monitors it.
// A typed child: `return caf::actor_cast<caf::actor>(sys.spawn(fn));`.
using child_factory = std::function<caf::actor(caf::actor_system&)>;

struct child_spec {
  std::string name;                 // unique within its supervisor
  child_factory start;
  restart_policy restart = restart_policy::permanent;
  // On an orderly stop the child gets exit_reason::user_shutdown and this
  // long to terminate; then exit_reason::kill. Zero kills at once (brutal_kill).
  std::chrono::milliseconds shutdown_timeout{5000};
};

struct supervisor_config {
  std::string name = "supervisor";
  restart_strategy strategy = restart_strategy::one_for_one;
  // At most max_restarts restarts within restart_period; one more and the
  // supervisor stops all children and exits with restart_intensity_exceeded.
  std::size_t max_restarts = 3;
  std::chrono::milliseconds restart_period{5000};
  // How long to wait for a child's down_msg after exit_reason::kill before
  // the supervisor gives up on it (an actor blocked outside its mailbox
  // cannot be killed in CAF) and moves on.
  std::chrono::milliseconds kill_grace{1000};
  std::vector<child_spec> children; // started in this order, stopped in reverse
  // Optional: receives child_exited and child_restarted (supervision_messages.hpp).
  caf::actor listener;
};

} // namespace dseek::actors

// Sent locally with start_child_atom; a factory cannot be serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::child_spec)
