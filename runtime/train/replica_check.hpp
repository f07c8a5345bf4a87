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

class GradientReducer;
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

struct ReplicaMismatch : std::runtime_error {
  ReplicaMismatch(int64_t at_step, std::string checked, std::vector<int> bad_ranks);
  int64_t step;
  std::string what_checked;  // "gradients" or "parameters"
  std::vector<int> ranks;    // the replicas that disagree with the majority
};

// The ranks whose hash differs from the majority's (ties: the hash of the lowest rank
// among the most common ones). Empty when all agree.
std::vector<int> ranks_off_majority(const std::vector<uint64_t>& hashes);

// Collective over the reducer's replicas: hashes `count` floats at `data` and compares.
// Returns the disagreeing ranks (empty: all agree).
std::vector<int> compare_replicas(GradientReducer& reducer, const float* data, size_t count);
// The same over a data group (the replicas of a pipeline stage or tensor rank), for a
// hash the caller took of what must agree (hash_ranges). Returns the disagreeing replicas.
std::vector<int> compare_replicas(ReplicaGroup& group, uint64_t hash);
// One hash of the floats of `ranges` (offsets into `base`), in their order.
uint64_t hash_ranges(const float* base, const std::vector<model::ParamRange>& ranges,
                     uint64_t seed = 0);
// Whether step `step` (0-based) checks the replicas (train.replica_check_every).
inline bool replica_check_due(int64_t every, int64_t step) { return every > 0 && step % every == 0; }

}  // namespace dseek::train
