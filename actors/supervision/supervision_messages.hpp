// Messages of dseek's supervisors: the query, command and event types, the
// error category and its codes. Announced by register_message_types()
// (actors/message_types.hpp).
#pragma once

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/supervision/child_spec.hpp"

namespace dseek::actors {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------

using which_children_atom = caf::atom_constant<caf::atom("whichchild")>;
using start_child_atom = caf::atom_constant<caf::atom("startchild")>;
using stop_child_atom = caf::atom_constant<caf::atom("stopchild")>;
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;

// -- replies -------------------------------------------------------------------

// One row of which_children, in start order.
struct child_info {
  std::string name;
  caf::actor handle;      // invalid while the child is not running
  std::uint32_t restarts = 0;
  restart_policy restart = restart_policy::permanent;
  bool running = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, child_info& x) {
  return f(caf::meta::type_name("child_info"), x.name, x.handle, x.restarts, x.restart,
           x.running);
}

// -- events (sent to supervisor_config::listener) ------------------------------

// A child terminated without being asked to (crash, normal end, kill by a
// third party). Sent before any restart.
struct child_exited {
  std::string supervisor;
  std::string child;
  caf::error reason;
  bool will_restart = false; // policy says restart (the intensity may still refuse)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, child_exited& x) {
  return f(caf::meta::type_name("child_exited"), x.supervisor, x.child, x.reason,
           x.will_restart);
}

// A child was started again. With one_for_all / rest_for_one, `cause` names
// the child whose exit triggered it and `reason` is that child's exit reason.
struct child_restarted {
  std::string supervisor;
  std::string child;
  caf::error reason;
  std::string cause;
  std::uint32_t restarts = 0; // of this child, this one included
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, child_restarted& x) {
  return f(caf::meta::type_name("child_restarted"), x.supervisor, x.child, x.reason,
           x.cause, x.restarts);
}

// -- errors ----------------------------------------------------------------------

// Category atom of supervision errors.
constexpr caf::atom_value supervision_category = caf::atom("dseek_sup");

enum class supervision_errc : std::uint8_t {
  // Context: (std::string child, uint32_t restarts, int64_t period_ms). The
  // supervisor's exit reason when it gives up.
  restart_intensity_exceeded = 1,
  // Context: (std::string child, std::string what). Exit reason of a
  // supervisor whose initial start failed; error reply of start_child.
  child_start_failed,
  // Context: (std::string child).
  unknown_child,
  duplicate_child,
  // The supervisor is stopping and takes no new children.
  shutting_down,
};

std::string to_string(supervision_errc x);

// Found by ADL, as CAF 0.17 expects of an error code enum (caf::error{supervision_errc::...}).
caf::error make_error(supervision_errc x, caf::message context = {});

// Renders a supervision error for humans; registered as the category's
// renderer by register_message_types().
std::string render_supervision_error(std::uint8_t code, caf::atom_value category,
                                     const caf::message& context);

// True for exits a transient child is not restarted after: none,
// exit_reason::normal, exit_reason::user_shutdown.
bool is_normal_exit(const caf::error& reason);

} // namespace dseek::actors
