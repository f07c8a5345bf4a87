// Messages between the actors of one node (dseek-node's tree): the worker's progress (and
// pauses) and
// replica-check disagreements to the health monitor, the end of the job to the node's
// main loop, and the lines the metrics exporter writes to the node's event log. Local to
// the process: never sent to another node, so not announced.
#pragma once

#include <cstdint>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>

#include "runtime/train/replica_check.hpp"

namespace dseek::actors {

// The worker finished a step (to the health monitor).
struct step_progress {
  std::int64_t step = 0;  // completed steps
  double loss = 0;
};

// The worker's training paused at a step boundary (paused), or goes on or stops after
// a pause (to the health monitor: a paused worker is not stalled).
struct training_paused {
  std::int64_t step = 0;  // completed steps
  bool paused = false;
};

// A replica check of the worker's training found disagreeing replicas (to the health
// monitor, which answers once it has reported it).
struct sdc_report {
  train::ReplicaDisagreement disagreement;
};

// The worker's training ended (to the node's main loop): done, stopped, or failed.
struct job_finished {
  bool ok = true;               // false: `error` says why
  // A failure no restart can cure (runtime/util/failure_kind.hpp): the node exits with
  // exit_code::permanent and nothing starts it again.
  bool permanent = false;
  bool stopped_early = false;   // a signal or train.stop_after_*
  std::string error;
  std::int64_t steps_done = 0;
  std::string params_sha256;
  bool group_broken = false;    // a gradient_shard was lost: the worker group restarts
  // The worker's supervisor shut it down (orderly), which the node actor did not
  // ask for when it reports this: the node supervisor is giving up (embedded_node.cpp).
  bool shut_down_by_supervisor = false;
  // The SDC audit found this node computing wrong gradients (train::SdcEvicted): it
  // leaves the job for good (exit_code::evicted).
  bool evicted = false;
};

// One line for the node's events.jsonl: the event name and its fields as a JSON
// object ("{...}", possibly "{}").
struct node_event {
  std::string event;
  std::string fields_json;
};

}  // namespace dseek::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::step_progress)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::training_paused)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::sdc_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::job_finished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::node_event)
