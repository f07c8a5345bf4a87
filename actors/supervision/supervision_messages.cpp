#include "actors/supervision/supervision_messages.hpp"

#include <caf/exit_reason.hpp>
#include <caf/message.hpp>

namespace dseek::actors {

std::string to_string(restart_policy x) {
  switch (x) {
    case restart_policy::permanent: return "permanent";
    case restart_policy::transient: return "transient";
    case restart_policy::temporary: return "temporary";
  }
  return "restart_policy(?)";
}

std::string to_string(restart_strategy x) {
  switch (x) {
    case restart_strategy::one_for_one: return "one_for_one";
    case restart_strategy::one_for_all: return "one_for_all";
    case restart_strategy::rest_for_one: return "rest_for_one";
  }
  return "restart_strategy(?)";
}

std::string to_string(supervision_errc x) {
  switch (x) {
    case supervision_errc::restart_intensity_exceeded: return "restart_intensity_exceeded";
    case supervision_errc::child_start_failed: return "child_start_failed";
    case supervision_errc::unknown_child: return "unknown_child";
    case supervision_errc::duplicate_child: return "duplicate_child";
    case supervision_errc::shutting_down: return "shutting_down";
  }
  return "supervision_errc(?)";
}

caf::error make_error(supervision_errc x, caf::message context) {
  return caf::error{static_cast<std::uint8_t>(x), supervision_category, std::move(context)};
}

std::string render_supervision_error(std::uint8_t code, caf::atom_value,
                                     const caf::message& ctx) {
  auto errc = static_cast<supervision_errc>(code);
  std::string out = "supervision: " + to_string(errc);
  if (errc == supervision_errc::restart_intensity_exceeded
      && ctx.match_elements<std::string, std::uint32_t, std::int64_t>()) {
    out += ": child '" + ctx.get_as<std::string>(0) + "' needed "
           + std::to_string(ctx.get_as<std::uint32_t>(1)) + " restarts within "
           + std::to_string(ctx.get_as<std::int64_t>(2)) + " ms";
  } else if (ctx.match_elements<std::string, std::string>()) {
    out += ": child '" + ctx.get_as<std::string>(0) + "': " + ctx.get_as<std::string>(1);
  } else if (ctx.match_elements<std::string>()) {
    out += ": child '" + ctx.get_as<std::string>(0) + "'";
  } else if (!ctx.empty()) {
    out += ": " + to_string(ctx);
  }
  return out;
}

bool is_normal_exit(const caf::error& reason) {
  return !reason || reason == caf::exit_reason::normal
         || reason == caf::exit_reason::user_shutdown;
}

} // namespace dseek::actors
