#include "actors/message_types.hpp"

#include <caf/actor_system_config.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/node/embedded_node.hpp"
#include "actors/supervision/supervisor.hpp"

namespace dseek::actors {

void register_supervision_types(caf::actor_system_config& cfg) {
  // add_message_type<T> also announces std::vector<T> and stream<T>.
  cfg.add_message_type<child_info>("dseek::actors::child_info");
  cfg.add_message_type<child_exited>("dseek::actors::child_exited");
  cfg.add_message_type<child_restarted>("dseek::actors::child_restarted");
  cfg.add_message_type<supervisor_actor>("dseek::actors::supervisor_actor");
  // child_spec (start_child_atom) holds a factory: local only, not announced.
  cfg.add_error_category(supervision_category, render_supervision_error);
}

void register_message_types(caf::actor_system_config& cfg) {
  register_supervision_types(cfg);
  register_cluster_types(cfg);
  register_node_messages(cfg);
}

} // namespace dseek::actors
