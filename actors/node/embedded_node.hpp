// A whole dseek node as one actor of the caller's actor system: what another CAF
// application embeds, and what `dseek-node` runs (run_node.hpp is a thin main over it).
// How to embed it, its requests, events, result and limits: docs/embedding.md.
//
// The node actor starts the node's tree at once (node_tree.hpp; the coordinator too on
// the coordinator node), folds its events into a status, tells its subscribers every
// event and, at the job's end, the result; then it stops the tree in order (the worker's
// final checkpoint, the node leaving the job; the coordinator node waits up to 120 s for
// the other members to leave) and exits. One node per actor system: its actors register
// under fixed names in the system's registry (node_registry.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/node/node_messages.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::actors {

using node_status_atom = caf::atom_constant<caf::atom("dnstatus")>;
using node_subscribe_atom = caf::atom_constant<caf::atom("dnsubscrib")>;
using node_stop_atom = caf::atom_constant<caf::atom("dnstop")>;
using node_pause_atom = caf::atom_constant<caf::atom("dnpause")>;
using node_resume_atom = caf::atom_constant<caf::atom("dnresume")>;
using node_checkpoint_atom = caf::atom_constant<caf::atom("dncheckpt")>;

// What the node is doing now, folded from its events.
struct node_status {
  // "starting" (until the coordinator is published and the tree started), "running"
  // (joining, training), "paused" (the job is held at a step boundary: train_paused),
  // "stopping" (a stop request or the job's end: the tree is shutting down), "finished"
  // (the result is out; the actor is about to exit).
  std::string phase = "starting";
  std::int64_t epoch = 0;       // the last epoch_started (0: none yet)
  std::int64_t world_size = 0;  // of that epoch
  std::int64_t step = 0;        // completed steps (the last step event, or the run's end)
  double loss = 0;              // of that step
  double tokens_per_s = 0;      // of that step
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_status& x) {
  return f(caf::meta::type_name("dseek::actors::node_status"), x.phase, x.epoch, x.world_size,
           x.step, x.loss, x.tokens_per_s);
}

// How the node's job ended (to every subscriber, once, after its last event).
struct node_result {
  // runtime/util/exit_codes.hpp, as dseek-node exits: 0 done or stopped orderly, 3
  // permanent failure, 4 evicted by the SDC audit, 1 any other failure.
  std::int32_t exit_code = 0;
  bool stopped_early = false;   // a stop request (or signal) ended the training first
  std::string reason;           // the failure (empty: none)
  std::string params_sha256;    // of the final parameters (train_done / train_stopped)
  std::int64_t steps = 0;       // completed steps
  double final_loss = 0;        // of the last step
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_result& x) {
  return f(caf::meta::type_name("dseek::actors::node_result"), x.exit_code, x.stopped_early,
           x.reason, x.params_sha256, x.steps, x.final_loss);
}

// The node's interface (the answers and errors of each request: docs/embedding.md). The
// implementation is a dynamically typed actor (it also takes the messages of its own
// tree); this handle is the contract for callers.
using node_actor = caf::typed_actor<
    // The node's status now.
    caf::replies_to<node_status_atom>::with<node_status>,
    // From now on, `subscriber` gets node_event (every line of the node's events.jsonl,
    // in order) and, at the end, one node_result.
    caf::replies_to<node_subscribe_atom, caf::actor>::with<caf::ok_atom>,
    // Stops the training at the next step boundary, as SIGTERM does for dseek-node; after
    // the job's end it only cuts short metrics.prometheus_linger_seconds.
    caf::replies_to<node_stop_atom>::with<caf::ok_atom>,
    // Pauses the whole job at the next step boundary; answers the completed steps.
    caf::replies_to<node_pause_atom>::with<std::int64_t>,
    // Lets go of this node's pause.
    caf::replies_to<node_resume_atom>::with<caf::ok_atom>,
    // A checkpoint of the whole job at the next step boundary; answers its step once
    // committed.
    caf::replies_to<node_checkpoint_atom>::with<std::int64_t>>;

struct node_options {
  std::filesystem::path run_dir;  // RUN_DIR: the node writes RUN_DIR/node-<id>/
  // How many times `dseek launch` restarted this node id (its injected faults fired in
  // incarnation 0 and do not fire again).
  int64_t incarnation = 0;
  // Told every event from the node's first and the result; subscribe
  // later for events from then on. Local actors (node_event is not announced).
  std::vector<caf::actor> subscribers;
  // Optional: a flag a signal handler sets; the node polls it every 100 ms and then
  // stops as for node_stop_atom (dseek-node's SIGINT / SIGTERM).
  const std::atomic<bool>* stop = nullptr;
};

// Announces every dseek message type and error category and loads the modules a node
// needs (the middleman; libcaf_openssl when `cluster.tls_ca` is set). Call it once on the
// host's config before creating the actor_system.
void register_node_types(caf::actor_system_config& cfg,
                         const config::ClusterConfig& cluster = config::ClusterConfig{});

// Starts one node of the job `config` in `sys` and returns its actor. Throws
// (config::ConfigError) before anything starts when the config cannot run here.
node_actor spawn_node(caf::actor_system& sys, const config::JobConfig& config,
                      const node_options& options);

// -- errors ----------------------------------------------------------------------

constexpr caf::atom_value node_category = caf::atom("dseek_node");

enum class node_errc : std::uint8_t {
  // subscribe with an invalid handle.
  invalid_subscriber = 1,
  // stop while a stop or the job's end is already under way.
  already_stopping,
  // The node actor's exit reason when the job did not end with exit code 0. Context:
  // (int32_t exit_code, std::string reason).
  job_failed,
  // pause or checkpoint while the node stops or has finished.
  not_running,
  // a pause or checkpoint request that the training's end came before.
  ended,
  // resume without a pause of this node's.
  not_paused,
  // checkpoint in a job that writes no checkpoints.
  no_checkpoints,
  // the checkpoint asked for was not committed (the writer's checkpoint_failed event).
  checkpoint_failed,
};

std::string to_string(node_errc x);
// Found by ADL, as CAF 0.17 expects of an error code enum (caf::error{node_errc::...}).
caf::error make_error(node_errc x, caf::message context = {});
std::string render_node_error(std::uint8_t code, caf::atom_value category,
                              const caf::message& context);

// Announces node_status, node_result and the node error category (register_message_types
// calls it).
void register_node_messages(caf::actor_system_config& cfg);

}  // namespace dseek::actors
