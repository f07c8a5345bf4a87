// Implementation of replica_check.hpp.
#include "runtime/train/replica_check.hpp"

#include <xxhash.h>

#include <map>

#include "runtime/train/gradient_reducer.hpp"

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

}  // namespace dseek::train
