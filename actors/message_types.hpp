// One call that announces every dseek message type (and error category) in
// an actor_system_config. Call it on every node before creating the
// actor_system: CAF 0.17 drops messages of types announced on one side only.
//
//   caf::actor_system_config cfg;
//   dseek::actors::register_message_types(cfg);
//   caf::actor_system sys{cfg};
#pragma once

#include <caf/fwd.hpp>

namespace dseek::actors {

void register_message_types(caf::actor_system_config& cfg);

// Per-module parts (register_message_types calls them all).
void register_supervision_types(caf::actor_system_config& cfg);

} // namespace dseek::actors
