// dseek's supervisor: OTP-style supervision for CAF 0.17 (which has none).
//
//   supervisor_config cfg;
//   cfg.name = "node";
//   cfg.strategy = restart_strategy::one_for_one;
//   cfg.max_restarts = 3; cfg.restart_period = std::chrono::seconds(5);
//   cfg.children.push_back({"health", [](caf::actor_system& sys) {
//     return sys.spawn(health_monitor); }, restart_policy::permanent,
//     std::chrono::seconds(2)});
//   auto sup = spawn_supervisor(sys, std::move(cfg));
//
// The supervisor starts its children in order and monitors them. A child
// that ends on its own is restarted by its policy and the strategy; more than
// max_restarts restarts in restart_period and the supervisor stops every child
// and exits with supervision_errc::restart_intensity_exceeded (its context
// names the child and the count), which its own supervisor sees as the
// down/exit reason. An exit message (not kill) or shutdown_atom stops the
// children one at a time in reverse start order (user_shutdown, then kill
// after the child's shutdown_timeout) before the supervisor exits. If the
// supervisor is killed or crashes, its live children are killed.
#pragma once

#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/supervision/child_spec.hpp"
#include "actors/supervision/supervision_messages.hpp"

namespace dseek::actors {

// The supervisor's interface. The implementation is a dynamically typed
// actor (it also takes exit/down messages and its own timers); this handle is
// the contract for callers.
using supervisor_actor = caf::typed_actor<
    // The children in start order.
    caf::replies_to<which_children_atom>::with<std::vector<child_info>>,
    // Adds a child at the end and starts it (local senders only). Errors:
    // duplicate_child, child_start_failed, shutting_down.
    caf::replies_to<start_child_atom, child_spec>::with<caf::actor>,
    // Stops a child (orderly, with its timeout) and removes its spec. Error:
    // unknown_child.
    caf::replies_to<stop_child_atom, std::string>::with<caf::ok_atom>,
    // Orderly shutdown; replies when every child is gone, then exits with
    // exit_reason::normal. Replies an error if the supervisor was already
    // giving up (restart intensity) and exits with that error.
    caf::replies_to<shutdown_atom>::with<caf::ok_atom>>;

supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_config cfg);

// A child spec that runs a whole supervisor (a subtree). Its shutdown timeout
// covers its children's timeouts plus their kill grace, plus one second.
child_spec supervisor_child(supervisor_config cfg,
                            restart_policy restart = restart_policy::permanent);

} // namespace dseek::actors
