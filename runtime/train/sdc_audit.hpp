// The SDC audit (train.sdc_audit_every): silent data corruption in a rank's own gradient
// (a faulty GPU or memory, before any reduction) poisons every replica's sum alike, so
// the replica check (replica_check.hpp), which compares reduced gradients, cannot see
// it. At an audit step every replica first recomputes another replica's slice of the
// step (a shadow step: the same parameters and batch on deterministic kernels give the
// same bits), then trains the step and hashes what it hands to the reduction; the data
// group compares each rank's hash with its auditor's. An accusation is confirmed by a
// second auditor before anyone is named, so a wrong auditor only clears itself. The
// pairing rotates from audit to audit. Needs three replicas (with two, nobody could tell
// which of them is wrong). The trainer's side: pipeline/stage_audit.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/util/json_line.hpp"

namespace dseek::train {

class ReplicaGroup;

inline constexpr int kSdcAuditMinReplicas = 3;

// Whether step `step` (0-based) is audited.
inline bool sdc_audit_due(int64_t every, int64_t step) { return every > 0 && step % every == 0; }

// The pairing of the audit of `step` (its index k = step / every): replica r recomputes
// the slice of (r + 1 + k mod (D - 1)) mod D, a rotation, so every replica is audited
// once per audit and by each other replica in turn.
int audit_target(int auditor, int replicas, int64_t audit_index);
int first_auditor(int target, int replicas, int64_t audit_index);
// Who confirms an accusation of `target`: the replica before its first auditor that is
// neither (D >= 3).
int second_auditor(int target, int replicas, int64_t audit_index);

// Every replica's few 64-bit values, through the group's sum of doubles (each value as
// four 16-bit parts, exact): [replica][i] of what each passed as `mine`.
std::vector<std::vector<uint64_t>> gather_over_replicas(ReplicaGroup& group,
                                                        std::span<const uint64_t> mine);

// An audit that confirmed corruption: every rank of the world throws it out of the step
// before the update, so no replica applies the poisoned sum. `ranks` are the world ranks
// ((replica x P + stage) x T + tensor rank, dist/run_layout.hpp) two auditors found
// wrong; the node of each leaves the job for good and the others redo the step without
// it (actors/control/epoch_loop.cpp).
struct SdcDetected : std::runtime_error {
  SdcDetected(int64_t at_step, std::vector<int> bad_ranks, std::vector<int> cleared_auditors);
  int64_t step;                // 0-based step of the audit
  std::vector<int> ranks;      // the world ranks confirmed wrong
  std::vector<int> cleared;    // first auditors whose accusation the second did not confirm
};

// Thrown on a node the audit found wrong, out of its training: the node leaves the job
// for good (exit_code::evicted: no launcher or restart loop starts it again).
struct SdcEvicted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The sdc_detected event's fields for an audit: step (1-based), checked = "local
// gradients", ranks ("1,2"), this_rank.
util::JsonLine sdc_audit_fields(const SdcDetected& detected, bool this_rank);

}  // namespace dseek::train
