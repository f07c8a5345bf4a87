// Implementation of replica_check.hpp.
#include "runtime/train/replica_check.hpp"

#include <xxhash.h>

#include <map>

#include "runtime/train/sdc_audit.hpp"

namespace dseek::train {

namespace {
// The ranks whose hash differs from the majority's (ties: the lowest rank's hash).
std::vector<int> ranks_off_majority(const std::vector<uint64_t>& hashes) {
  std::map<uint64_t, int> votes;
  for (uint64_t h : hashes) ++votes[h];
  uint64_t majority = hashes.empty() ? 0 : hashes.front();
  int best = 0;
  for (uint64_t h : hashes) {  // rank order: the lowest rank wins a tie
    if (votes[h] > best) {
      best = votes[h];
      majority = h;
    }
  }
  std::vector<int> off;
  for (size_t r = 0; r < hashes.size(); ++r)
    if (hashes[r] != majority) off.push_back(static_cast<int>(r));
  return off;
}
}  // namespace

util::JsonLine sdc_detected_fields(const ReplicaDisagreement& disagreement) {
  return util::JsonLine().add("step", disagreement.step + 1).add("checked", disagreement.checked)
      .add("ranks", util::id_list(disagreement.ranks)).add("this_replica", disagreement.this_replica);
}

ReplicaMismatch::ReplicaMismatch(int64_t at_step, const std::string& checked,
                                 const std::vector<int>& bad_ranks)
    : std::runtime_error("replica check at step " + std::to_string(at_step + 1) + ": the " +
                         checked + " of rank(s) " + util::id_list(bad_ranks, ", ") +
                         " differ from the other replicas' (silent data corruption)") {}

std::vector<int> compare_replicas(ReplicaGroup& group, uint64_t hash) {
  std::vector<uint64_t> hashes;
  for (const auto& of_replica : gather_over_replicas(group, std::span<const uint64_t>(&hash, 1)))
    hashes.push_back(of_replica.front());
  return ranks_off_majority(hashes);
}

uint64_t hash_ranges(const float* base, const std::vector<model::ParamRange>& ranges,
                     uint64_t seed) {
  uint64_t hash = seed;
  for (const model::ParamRange& r : ranges)
    hash = XXH64(base + r.offset, r.count * sizeof(float), hash);
  return hash;
}

}  // namespace dseek::train
