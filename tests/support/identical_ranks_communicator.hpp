// A comm::Communicator test double standing for `size` ranks that all hold what this
// rank holds: sums are size times the values, averages the values, an all-gather fills
// the other ranks' shards by repeating this rank's bytes, so a test in one process knows
// every result exactly. It reduces f32 sums and averages of any type. Operations finish
// at once; `fail_next` (or abort()) makes the next one fail as a dead peer would;
// `after_all_gather` lets a test make another rank's shard differ. Used by
// the unit tests of the gradient reducer (test_backend_memory_reduction.cpp,
// test_fp8_compressed_reduction.cpp); the same paths over real UCX ranks are tests/dp's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace dseek::testing {

class IdenticalRanksCommunicator final : public comm::Communicator {
 public:
  IdenticalRanksCommunicator(int rank, int size) : rank_(rank), size_(size) {
    for (int r = 0; r < size; ++r) world_.push_back(r);
  }
  bool fail_next = false;
  // Called on the result of every all-gather: a test may make another rank's shard differ
  // from this rank's (e.g. another replica's overflow flag).
  std::function<void(void* out, size_t count, comm::DataType type)> after_all_gather;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t epoch() const override { return 1; }
  const std::vector<int>& world_ranks() const override { return world_; }
  using Communicator::all_reduce;
  comm::Work all_reduce(const void* in, void* out, size_t count, comm::DataType type,
                        comm::ReduceOp op) override {
    if (op == comm::ReduceOp::avg) {  // the mean of identical values, in any type
      std::memmove(out, in, count * comm::element_size(type));
      return done();
    }
    require_f32_sum(type, op);
    std::vector<float> values(count);
    std::memcpy(values.data(), in, count * sizeof(float));
    for (float& v : values) v *= static_cast<float>(size_);
    std::memcpy(out, values.data(), count * sizeof(float));
    return done();
  }
  comm::Work reduce_scatter(const void* in, void* out, size_t count, comm::DataType type,
                            comm::ReduceOp op) override {
    require_f32_sum(type, op);
    const float* piece = static_cast<const float*>(in) + shard_offset(count);
    std::vector<float> values(piece, piece + shard_count(count));
    for (float& v : values) v *= static_cast<float>(size_);
    std::memcpy(out, values.data(), values.size() * sizeof(float));
    return done();
  }
  comm::Work all_gather(const void* in, void* out, size_t count, comm::DataType type) override {
    const size_t es = comm::element_size(type);
    const size_t mine_bytes = shard_count(count) * es;
    std::vector<std::byte> mine(mine_bytes);
    std::memcpy(mine.data(), in, mine_bytes);
    auto* bytes = static_cast<std::byte*>(out);
    for (int r = 0; r < size_; ++r) {
      std::byte* shard = bytes + comm::shard_offset(count, size_, r) * es;
      const size_t n = comm::shard_count(count, size_, r) * es;
      for (size_t i = 0; i < n && mine_bytes > 0; ++i) shard[i] = mine[i % mine_bytes];
    }
    if (after_all_gather) after_all_gather(out, count, type);
    return done();
  }
  comm::Work broadcast(void*, size_t, comm::DataType, int) override { return done(); }
  comm::Work send(const void*, size_t, comm::DataType, int) override { return done(); }
  comm::Work recv(void* data, size_t count, comm::DataType type, int) override {
    std::memset(data, 0x11, count * comm::element_size(type));
    return done();
  }
  comm::Work barrier() override { return done(); }
  void abort(const std::string&) override { fail_next = true; }
  std::unique_ptr<comm::Communicator> subgroup(const std::vector<int>&) override {
    throw std::logic_error("IdenticalRanksCommunicator has no sub-groups");
  }
  comm::CommCounters counters() const override { return {}; }

 private:
  static void require_f32_sum(comm::DataType type, comm::ReduceOp op) {
    if (type != comm::DataType::f32 || op != comm::ReduceOp::sum)
      throw std::logic_error("IdenticalRanksCommunicator reduces f32 sums and averages only");
  }
  comm::Work done() {
    auto state = std::make_shared<comm::WorkState>("test", std::chrono::steady_clock::now());
    if (fail_next) {
      fail_next = false;
      state->fail(comm::ErrorKind::peer_failed, "a peer died (test)");
    } else {
      state->complete();
    }
    return comm::Work(state);
  }
  int rank_, size_;
  std::vector<int> world_;
};

}  // namespace dseek::testing
