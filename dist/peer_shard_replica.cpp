// Implementation of peer_shard_replica.hpp.
#include "dist/peer_shard_replica.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "dist/gradient_buckets.hpp"

namespace dseek::dist {

namespace {

size_t element_count(const std::vector<model::ParamRange>& ranges) {
  size_t count = 0;
  for (const auto& range : ranges) count += range.count;
  return count;
}

}  // namespace

std::vector<model::ParamRange> zero_shard_of(const std::vector<model::ParamRange>& backward_order,
                                             size_t total, size_t bucket_bytes, int rank,
                                             int world_size) {
  return shard_of(plan_gradient_buckets(backward_order, total, bucket_bytes, rank, world_size));
}

float* pack_ranges(const std::vector<model::ParamRange>& ranges, const float* from, float* packed) {
  for (const auto& range : ranges) packed = std::copy_n(from + range.offset, range.count, packed);
  return packed;
}

const float* unpack_ranges(const std::vector<model::ParamRange>& ranges, const float* packed,
                           float* to) {
  for (const auto& range : ranges) {
    std::copy_n(packed, range.count, to + range.offset);
    packed += range.count;
  }
  return packed;
}

void pack_moments(const std::vector<model::ParamRange>& ranges, const float* m, const float* v,
                  std::vector<float>& packed) {
  packed.resize(2 * element_count(ranges));
  pack_ranges(ranges, v, pack_ranges(ranges, m, packed.data()));
}

void unpack_moments(const std::vector<model::ParamRange>& ranges, const float* packed, float* m,
                    float* v) {
  unpack_ranges(ranges, unpack_ranges(ranges, packed, m), v);
}

void exchange_with_neighbours(comm::Communicator& comm, const std::vector<float>& outgoing,
                              int to, std::vector<float>& incoming, int from) {
  // Both posted before either is waited for: with two ranks the peers are the same
  // node, and each must be sending while the other receives.
  auto received = comm.recv(incoming.data(), incoming.size(), comm::DataType::f32, from);
  auto sent = comm.send(outgoing.data(), outgoing.size(), comm::DataType::f32, to);
  try {
    received.wait();
    sent.wait();
  } catch (...) {
    // The data plane may still write into `incoming` or read `outgoing` until both
    // transfers have ended: end them (the epoch is over anyway) before the buffers can go.
    comm.abort("the peer shard replica's exchange failed");
    for (auto* work : {&received, &sent}) {
      try {
        work->wait();
      } catch (...) {  // expected: aborted
      }
    }
    throw;
  }
}

PeerShardReplica::PeerShardReplica(comm::Communicator& comm, train::TrainingState& state,
                                   size_t bucket_bytes, int ranks_per_node)
    : comm_(comm), state_(state), bucket_bytes_(bucket_bytes), ranks_per_node_(ranks_per_node) {}

void PeerShardReplica::prepare(train::Trainer& trainer) {
  const int world = comm_.size();
  const int rank = comm_.rank();
  const auto* reducer = trainer.reducer();
  if (reducer == nullptr || !reducer->shards_optimizer_state())
    throw std::logic_error("PeerShardReplica: the trainer does not shard its optimizer state");
  own_ranges_ = reducer->shard();
  const size_t total = trainer.model().num_params();
  const auto order = trainer.model().gradient_ranges_in_backward_order();
  // The neighbour's shard is computed by the reducer's own rule: check that rule on this
  // rank's shard, so a change of the rule cannot silently replicate the wrong ranges.
  if (zero_shard_of(order, total, bucket_bytes_, rank, world) != own_ranges_)
    throw std::logic_error("PeerShardReplica: the ZeRO shard rule disagrees with the reducer's");
  if (world > 1) {
    // The same local rank of the next node; a world left on one node: the next rank.
    const int stride = world > ranks_per_node_ ? ranks_per_node_ : 1;
    successor_ = (rank + stride) % world;
    predecessor_ = (rank + world - stride) % world;
    replica_ranges_ = zero_shard_of(order, total, bucket_bytes_, successor_, world);
  }
  footprint_.holds_rank = world > 1 ? successor_ : -1;
  footprint_.own_bytes = 2 * element_count(own_ranges_) * sizeof(float);
  footprint_.replica_bytes = 2 * element_count(replica_ranges_) * sizeof(float);
  outgoing_.reserve(2 * element_count(own_ranges_));
  incoming_.resize(2 * element_count(replica_ranges_));
  footprint_.state_bytes =
      (3 * total + outgoing_.capacity() + incoming_.size()) * sizeof(float);

  // The state this node held before (a recovered whole state, or shards of another
  // world) is overwritten piece by piece from here on: what of it stays valid for the
  // replica's ranges until the first exchange completes.
  const bool was_whole = state_.sharded_world == 0 && state_.steps_done >= 0;
  const bool same_replica = state_.sharded_world == world && state_.replica_shard == successor_;
  if (!was_whole && !same_replica) state_.replica_steps_done = -1;
  if (was_whole) state_.replica_steps_done = state_.steps_done;
  state_.params.resize(total);
  state_.adam_m.resize(total);
  state_.adam_v.resize(total);
  prepared_ = true;
}

void PeerShardReplica::after_step(int64_t steps_done, train::Trainer& trainer) {
  if (!prepared_) prepare(trainer);
  const auto start = std::chrono::steady_clock::now();
  state_.sharded_world = comm_.size();
  state_.own_shard = comm_.rank();
  state_.own_ranges = own_ranges_;
  state_.replica_shard = successor_;
  state_.replica_ranges = replica_ranges_;
  trainer.snapshot_owned(state_.params.data(), state_.adam_m.data(), state_.adam_v.data());
  state_.optimizer_steps = trainer.optimizer_steps();
  state_.steps_done = steps_done;
  if (successor_ >= 0) {
    pack_moments(own_ranges_, state_.adam_m.data(), state_.adam_v.data(), outgoing_);
    exchange_with_neighbours(comm_, outgoing_, predecessor_, incoming_, successor_);
    // Only a whole replica is committed: until here the arrays hold the previous one.
    unpack_moments(replica_ranges_, incoming_.data(), state_.adam_m.data(), state_.adam_v.data());
    state_.replica_steps_done = steps_done;
  }
  ++steps_kept_;
  last_exchange_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  total_exchange_ms_ += last_exchange_ms_;
}

}  // namespace dseek::dist
