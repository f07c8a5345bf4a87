// The trainer's side of the SDC audit (sdc_audit.hpp): the recomputation of another
// replica's slice of the step, and the verdict after the reduction. Every rank of the
// world takes part in the same collectives in the same order: the recomputations run
// inside each replica (its stages and tensor ranks together), the hashes are compared
// inside each data group, and the accusations and confirmations are summed over the
// world, so every rank reaches the same verdict.
#include <algorithm>
#include <cstring>

#include "runtime/train/pipeline/stage_chunk.hpp"
#include "runtime/train/sdc_audit.hpp"

namespace dseek::train {

uint64_t PipelineStageTrainer::recompute_hash(int64_t step, int target, bool keep_gradients) {
  // The parameters of the step (an overlapped update done), and, for a second auditor
  // (it recomputes after its own reduction, whose sums the update still needs), the
  // gradients put aside; at the step's start they are the last step's, of no more use.
  finish_update();
  std::vector<std::vector<float>> kept(keep_gradients ? chunks_.size() : 0);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    PipelineChunk& model = *chunks_[c]->model;
    if (keep_gradients) {
      kept[c].resize(model.buffer_floats());
      backend_->copy_to_host(kept[c].data(), model.grads(), kept[c].size() * sizeof(float));
    }
    model.zero_grads();
  }
  const double loss = loss_, busy_ms = busy_ms_, recv_wait_ms = recv_wait_ms_, data_wait_ms = data_wait_ms_;
  const bool hashing = hashing_;
  const uint64_t hash_so_far = handed_over_hash_;
  const bool zero_after_forward = zero_grads_after_forward_;
  zero_grads_after_forward_ = false;

  take_share(target);
  recomputing_ = hashing_ = true;
  in_recomputation_pending_ = static_cast<bool>(in_recomputation_);
  handed_over_hash_ = 0;
  run_schedule(step);
  sum_tied_wte();
  // Without overlap the step hands every owned range over after the pipeline drained.
  if (!overlaps_reduction_)
    for (auto& chunk : chunks_)
      for (const model::ParamRange& range : chunk->owned) hand_over(*chunk, range);
  const uint64_t hash = handed_over_hash_;

  recomputing_ = false;
  take_share(replica());
  hashing_ = hashing;
  handed_over_hash_ = hash_so_far;
  zero_grads_after_forward_ = zero_after_forward;
  loss_ = loss;
  busy_ms_ = busy_ms;
  recv_wait_ms_ = recv_wait_ms;
  data_wait_ms_ = data_wait_ms;
  for (size_t c = 0; c < kept.size(); ++c) {
    PipelineChunk& model = *chunks_[c]->model;
    backend_->copy_from_host(model.grads(), kept[c].data(), kept[c].size() * sizeof(float));
    // The host staging of a plane that reads host memory holds the reduced sums again.
    if (!chunks_[c]->reduces_backend_memory) chunks_[c]->grads_host->to_host(chunks_[c]->owned);
  }
  return hash;
}

void PipelineStageTrainer::audit_verdict(int64_t step, uint64_t own_hash, uint64_t audit_hash,
                                         StepReport& report) {
  const int D = replicas();
  const int64_t index = step / config_.train.sdc_audit_every;
  const int P = static_cast<int>(plan_.shape.stages);
  const int T = tensor_ranks();
  const auto world_rank = [&](int replica_index) {
    return (replica_index * P + static_cast<int>(stage_)) * T + tensor_rank();
  };
  const size_t world = static_cast<size_t>(D * P * T);
  const uint64_t mine[2] = {own_hash, audit_hash};
  const auto hashes = gather_over_replicas(*replicas_, mine);  // [replica] = {own, audit}
  // Replica 0 of each data group writes the group's accusations, so the world's sums
  // count each once.
  std::vector<double> accused(world, 0.0);
  if (replica() == 0)
    for (int x = 0; x < D; ++x)
      if (hashes[static_cast<size_t>(first_auditor(x, D, index))][1] != hashes[static_cast<size_t>(x)][0])
        accused[static_cast<size_t>(world_rank(x))] = 1.0;
  sum_over_world(accused);
  if (std::all_of(accused.begin(), accused.end(), [](double a) { return a == 0.0; })) return;

  // A second auditor recomputes each accused replica's slice: every rank of that
  // replica, in replica order, whatever group accused it.
  std::vector<double> confirmed(world, 0.0);
  for (int x = 0; x < D; ++x) {
    bool accused_anywhere = false;
    for (int s = 0; s < P * T; ++s) accused_anywhere = accused_anywhere || accused[static_cast<size_t>(x * P * T + s)] > 0;
    if (!accused_anywhere) continue;
    const int second = second_auditor(x, D, index);
    const uint64_t recomputed = replica() == second ? recompute_hash(step, x, true) : 0;
    const auto seconds = gather_over_replicas(*replicas_, std::span<const uint64_t>(&recomputed, 1));
    if (replica() == 0 && accused[static_cast<size_t>(world_rank(x))] > 0 &&
        seconds[static_cast<size_t>(second)][0] != hashes[static_cast<size_t>(x)][0])
      confirmed[static_cast<size_t>(world_rank(x))] = 1.0;
  }
  sum_over_world(confirmed);
  std::vector<int> bad, cleared;
  for (size_t r = 0; r < world; ++r) {
    if (confirmed[r] > 0) {
      bad.push_back(static_cast<int>(r));
    } else if (accused[r] > 0) {
      // The first auditor of that rank recomputed wrong (or the rank's own hash was).
      const int rank = static_cast<int>(r);
      const int x = rank / (P * T);
      cleared.push_back(rank - x * P * T + first_auditor(x, D, index) * P * T);
    }
  }
  if (!bad.empty()) throw SdcDetected(step, bad, cleared);
  report.sdc_cleared_auditors = util::id_list(cleared);
}

}  // namespace dseek::train
