// Implementation of replica_check.hpp.
#include "runtime/train/replica_check.hpp"

#include <xxhash.h>

#include <map>

#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::train {

namespace {
std::string describe(int64_t step, const std::string& checked, const std::vector<int>& ranks) {
  std::string list;
  for (int rank : ranks) {
    if (!list.empty()) list += ", ";
    list += std::to_string(rank);
  }
  return "replica check at step " + std::to_string(step + 1) + ": the " + checked +
         " of rank(s) " + list + " differ from the other replicas' (silent data corruption)";
}
}  // namespace

util::JsonLine sdc_detected_fields(const ReplicaDisagreement& disagreement) {
  std::string list;
  for (int rank : disagreement.ranks) {
    if (!list.empty()) list += ',';
    list += std::to_string(rank);
  }
  return util::JsonLine().add("step", disagreement.step + 1).add("checked", disagreement.checked)
      .add("ranks", list).add("this_replica", disagreement.this_replica);
}

ReplicaMismatch::ReplicaMismatch(int64_t at_step, std::string checked, std::vector<int> bad_ranks)
    : std::runtime_error(describe(at_step, checked, bad_ranks)), step(at_step),
      what_checked(std::move(checked)), ranks(std::move(bad_ranks)) {}

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

std::vector<int> compare_replicas(GradientReducer& reducer, const float* data, size_t count) {
  const uint64_t mine = XXH64(data, count * sizeof(float), 0);
  return ranks_off_majority(reducer.gather_u64(mine));
}

// Every replica's hash through the group's sum of doubles: replica r writes its hash as
// four 16-bit parts at [4r, 4r + 4), the others zeros, so each sum is exact.
std::vector<int> compare_replicas(ReplicaGroup& group, uint64_t hash) {
  const int replicas = group.replicas();
  std::vector<double> parts(static_cast<size_t>(4 * replicas), 0.0);
  for (int p = 0; p < 4; ++p)
    parts[static_cast<size_t>(4 * group.replica() + p)] =
        static_cast<double>((hash >> (16 * p)) & 0xffffu);
  group.sum(parts);
  std::vector<uint64_t> hashes(static_cast<size_t>(replicas), 0);
  for (int r = 0; r < replicas; ++r)
    for (int p = 0; p < 4; ++p)
      hashes[static_cast<size_t>(r)] |= static_cast<uint64_t>(parts[static_cast<size_t>(4 * r + p)])
                                        << (16 * p);
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
