#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/clock_offset.hpp"

#include <caf/actor_system_config.hpp>

namespace dseek::actors {

std::string to_string(cluster_errc x) {
  switch (x) {
    case cluster_errc::auth_failed: return "auth_failed";
    case cluster_errc::bad_challenge: return "bad_challenge";
    case cluster_errc::not_a_member: return "not_a_member";
    case cluster_errc::no_secret: return "no_secret";
    case cluster_errc::connect_failed: return "connect_failed";
    case cluster_errc::coordinator_lost: return "coordinator_lost";
    case cluster_errc::busy: return "busy";
    case cluster_errc::stale_epoch: return "stale_epoch";
    case cluster_errc::node_id_taken: return "node_id_taken";
    case cluster_errc::no_quorum: return "no_quorum";
  }
  return "cluster_errc(?)";
}

caf::error make_error(cluster_errc x, caf::message context) {
  return caf::error{static_cast<std::uint8_t>(x), cluster_category, std::move(context)};
}

caf::error no_secret_error() {
  return make_error(cluster_errc::no_secret,
                    caf::make_message(std::string{
                        "set the cluster secret (setting or DSEEK_CLUSTER_SECRET)"}));
}

std::string render_cluster_error(std::uint8_t code, caf::atom_value,
                                 const caf::message& ctx) {
  auto errc = static_cast<cluster_errc>(code);
  std::string out = "cluster: " + to_string(errc);
  if (ctx.match_elements<std::string, std::string>()) {
    out += ": " + ctx.get_as<std::string>(0) + ": " + ctx.get_as<std::string>(1);
  } else if (ctx.match_elements<std::string>()) {
    out += ": " + ctx.get_as<std::string>(0);
  } else if (!ctx.empty()) {
    out += ": " + to_string(ctx);
  }
  return out;
}

void register_cluster_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<join_challenge>("dseek::actors::join_challenge");
  cfg.add_message_type<join_proof>("dseek::actors::join_proof");
  cfg.add_message_type<member_info>("dseek::actors::member_info");
  cfg.add_message_type<worker_assignment>("dseek::actors::worker_assignment");
  cfg.add_message_type<epoch_started>("dseek::actors::epoch_started");
  cfg.add_message_type<rendezvous_result>("dseek::actors::rendezvous_result");
  cfg.add_message_type<node_joined>("dseek::actors::node_joined");
  cfg.add_message_type<node_lost>("dseek::actors::node_lost");
  cfg.add_message_type<join_refused>("dseek::actors::join_refused");
  cfg.add_message_type<agent_event>("dseek::actors::agent_event");
  cfg.add_message_type<clock_offset_measured>("dseek::actors::clock_offset_measured");
  cfg.add_error_category(cluster_category, render_cluster_error);
}

} // namespace dseek::actors
