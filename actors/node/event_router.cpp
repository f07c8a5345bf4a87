// Implementation of event_router.hpp.
#include "actors/node/event_router.hpp"

#include <string>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/cluster/clock_offset.hpp"
#include "actors/cluster/cluster_messages.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/supervision/supervision_messages.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::actors {

namespace {

struct router_state {
  epoch_started last_epoch;
  static inline const char* name = "dseek.event_router";
};

std::string plan_text(const epoch_started& e) {
  std::string text;
  for (const auto& a : e.plan) {
    if (!text.empty()) text += ' ';
    text += "node" + std::to_string(a.node_id) + ":" + a.role + "/rank" + std::to_string(a.rank);
  }
  return text;
}

std::string members_text(const epoch_started& e) {
  std::string text;
  for (const auto& m : e.members) {
    if (!text.empty()) text += ',';
    text += std::to_string(m.node_id);
  }
  return text;
}

caf::behavior event_router(caf::stateful_actor<router_state>* self, caf::actor node_main,
                           int local_ranks) {
  auto log = [self](const char* event, const util::JsonLine& fields) {
    names::send_to(self->system(), names::metrics_exporter, node_event{event, fields.str()});
  };
  auto to_workers = [self, local_ranks](const auto& event) {
    for (int local_rank = 0; local_rank < local_ranks; ++local_rank)
      names::send_to(self->system(), names::worker_of(local_rank), event);
  };
  return {
      [=](const node_joined& e) {
        log("node_joined", util::JsonLine().add("joined_node", e.node_id).add("host", e.host)
                               .add("epoch", e.epoch).add("rejoined", e.rejoined));
        to_workers(e);
      },
      [=](const node_lost& e) {
        log("node_lost", util::JsonLine().add("lost_node", e.lost_node).add("reason", e.reason)
                             .add("detection_ms", e.detection_ms)
                             .add("since_heartbeat_ms", e.since_heartbeat_ms)
                             .add("epoch", e.epoch));
        to_workers(e);
      },
      [=](const epoch_started& e) {
        if (!is_newer_epoch(e, self->state.last_epoch)) return;
        self->state.last_epoch = e;
        log("epoch_started", util::JsonLine().add("epoch", e.epoch)
                                 .add("world_size", static_cast<int64_t>(e.world_size))
                                 .add("members", members_text(e)).add("plan", plan_text(e)));
        to_workers(e);
      },
      [=](const join_refused& e) {
        log("join_refused", util::JsonLine().add("refused_node", e.node_id)
                                .add("coordinator", e.coordinator).add("reason", e.reason));
        // The coordinator's refusals of others (empty coordinator) do not end this node.
        if (!e.coordinator.empty()) caf::anon_send(node_main, e);
      },
      [=](const agent_event& e) {
        log("membership", util::JsonLine().add("kind", e.kind).add("coordinator", e.coordinator)
                              .add("reason", e.reason));
        if (e.kind == "join_failed") caf::anon_send(node_main, e);
        // This node no longer hears its coordinator, or was dropped by it (evicted: the
        // heartbeat timed out, or a peer could not reach it on the data plane): its
        // epoch is over whatever comes next (the coordinator declares it lost, or a new
        // incarnation starts afresh), so the workers leave its collectives now, not at
        // the data plane's timeout, and are ready when the node rejoins.
        if ((e.kind == "coordinator_lost" || e.kind == "no_quorum" || e.kind == "evicted") &&
            self->state.last_epoch.epoch > 0)
          to_workers(node_lost{-1, e.kind == "evicted" ? "evicted: " + e.reason
                                                       : "coordinator lost: " + e.reason,
                               0, 0, self->state.last_epoch.epoch + 1});
      },
      [=](const clock_offset_measured& e) {
        log("clock_offset", util::JsonLine().add("offset_us", e.offset_us).add("rtt_us", e.rtt_us)
                                .add("rounds", static_cast<int64_t>(e.rounds))
                                .add("coordinator", e.coordinator));
      },
      [=](const child_restarted& e) {
        log("actor_restarted", util::JsonLine().add("supervisor", e.supervisor)
                                   .add("actor", e.child)
                                   .add("reason", self->system().render(e.reason))
                                   .add("cause", e.cause)
                                   .add("restarts", static_cast<int64_t>(e.restarts)));
      },
      [=](const child_exited& e) {
        log("actor_exited", util::JsonLine().add("supervisor", e.supervisor).add("actor", e.child)
                                .add("reason", self->system().render(e.reason))
                                .add("will_restart", e.will_restart));
      },
      [self](caf::get_atom) { return self->state.last_epoch; },
  };
}

caf::behavior refusal_logger(caf::event_based_actor* self) {
  return {
      [self](const join_refused& e) {
        names::send_to(self->system(), names::metrics_exporter,
                       node_event{"join_refused", util::JsonLine()
                                                      .add("refused_node", e.node_id)
                                                      .add("reason", e.reason).str()});
      },
      [](const node_joined&) {}, [](const node_lost&) {}, [](const epoch_started&) {},
  };
}

}  // namespace

caf::actor spawn_event_router(caf::actor_system& sys, caf::actor node_main, int local_ranks) {
  return sys.spawn(event_router, std::move(node_main), local_ranks);
}

caf::actor spawn_refusal_logger(caf::actor_system& sys) {
  return sys.spawn(refusal_logger);
}

}  // namespace dseek::actors
