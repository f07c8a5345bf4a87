// Implementation of sdc_audit.hpp: the pairing, the gather of hashes, the verdict's
// exception and event.
#include "runtime/train/sdc_audit.hpp"

#include "runtime/train/layout/replica_group.hpp"

namespace dseek::train {

namespace {
int wrap(int64_t value, int modulus) {
  return static_cast<int>(((value % modulus) + modulus) % modulus);
}
}  // namespace

int audit_target(int auditor, int replicas, int64_t audit_index) {
  return wrap(auditor + 1 + audit_index % (replicas - 1), replicas);
}

int first_auditor(int target, int replicas, int64_t audit_index) {
  return wrap(target - 1 - audit_index % (replicas - 1), replicas);
}

int second_auditor(int target, int replicas, int64_t audit_index) {
  const int first = first_auditor(target, replicas, audit_index);
  int second = wrap(first - 1, replicas);
  if (second == target) second = wrap(second - 1, replicas);
  return second;
}

std::vector<std::vector<uint64_t>> gather_over_replicas(ReplicaGroup& group,
                                                        std::span<const uint64_t> mine) {
  const size_t replicas = static_cast<size_t>(group.replicas());
  const size_t n = mine.size();
  std::vector<double> parts(replicas * n * 4, 0.0);
  const size_t base = static_cast<size_t>(group.replica()) * n * 4;
  for (size_t i = 0; i < n; ++i)
    for (size_t p = 0; p < 4; ++p)
      parts[base + i * 4 + p] = static_cast<double>((mine[i] >> (16 * p)) & 0xffffu);
  group.sum(parts);
  std::vector<std::vector<uint64_t>> all(replicas, std::vector<uint64_t>(n, 0));
  for (size_t r = 0; r < replicas; ++r)
    for (size_t i = 0; i < n; ++i)
      for (size_t p = 0; p < 4; ++p)
        all[r][i] |= static_cast<uint64_t>(parts[(r * n + i) * 4 + p]) << (16 * p);
  return all;
}

SdcDetected::SdcDetected(int64_t at_step, std::vector<int> bad_ranks, std::vector<int> cleared_auditors)
    : std::runtime_error("SDC audit at step " + std::to_string(at_step + 1) + ": the gradients rank(s) " +
                         util::id_list(bad_ranks) + " computed differ from two other replicas' "
                         "recomputation of the same batch (silent data corruption on that node)"),
      step(at_step), ranks(std::move(bad_ranks)), cleared(std::move(cleared_auditors)) {}

util::JsonLine sdc_audit_fields(const SdcDetected& detected, bool this_rank) {
  util::JsonLine fields;
  fields.add("step", detected.step + 1).add("checked", std::string("local gradients"))
      .add("ranks", util::id_list(detected.ranks)).add("this_rank", this_rank);
  if (!detected.cleared.empty()) fields.add("cleared_auditors", util::id_list(detected.cleared));
  return fields;
}

}  // namespace dseek::train
