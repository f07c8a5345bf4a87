// Silent data corruption checks between data-parallel replicas: every replica hashes a
// buffer that must be bit-identical everywhere (the reduced gradients under ZeRO 0, the
// parameters after the update), the hashes are gathered, and the replicas that disagree
// with the majority are named. With two replicas there is no majority: rank 0 is
// trusted. A replica that finds itself in the minority throws ReplicaMismatch and leaves
// the job (its node restarts and takes a healthy peer's state); the others go on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/model/param_layout.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::train {

class ReplicaGroup;

// A replica check that found disagreeing replicas, as every replica sees it: the
// sdc_detected event (written by run_training, or in dseek-node by the node's
// health_monitor actor).
struct ReplicaDisagreement {
  int64_t step = 0;           // 0-based step of the check
  std::string checked;        // "gradients" or "parameters"
  std::vector<int> ranks;     // the replicas off the majority
  bool this_replica = false;  // this replica is one of them: it leaves the job
};
// The sdc_detected event's fields: step (1-based), checked, ranks ("1,2"), this_replica.
util::JsonLine sdc_detected_fields(const ReplicaDisagreement& disagreement);

// Thrown by the replica in the minority; `checked` is "gradients" or "parameters" and
// `bad_ranks` the replicas that disagree with the majority.
struct ReplicaMismatch : std::runtime_error {
  ReplicaMismatch(int64_t at_step, const std::string& checked, const std::vector<int>& bad_ranks);
};

// Collective over a data group (the replicas of a pipeline stage or tensor rank), for a
// hash the caller took of what must agree (hash_ranges): the replicas whose hash differs
// from the majority's (ties: the lowest rank's among the most common), empty when all agree.
std::vector<int> compare_replicas(ReplicaGroup& group, uint64_t hash);
// One hash of the floats of `ranges` (offsets into `base`), in their order.
uint64_t hash_ranges(const float* base, const std::vector<model::ParamRange>& ranges,
                     uint64_t seed = 0);
// Whether step `step` (0-based) checks the replicas (train.replica_check_every).
inline bool replica_check_due(int64_t every, int64_t step) { return every > 0 && step % every == 0; }

}  // namespace dseek::train
