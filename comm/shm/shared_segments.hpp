// The shared-memory segments of the ranks of one world that all run on this host: one
// POSIX shm segment per rank (a flag page, then two staging slots and two result slots of
// `chunk_bytes` each, so that one chunk can be staged while the previous one is still
// read), every rank mapping every other's. Each slot has a page more than a chunk: the
// writer places its data at a page offset of its choice (alias_offset.hpp), and
// publishes it with the flag. The shared-memory all-reduce
// (shm_allreduce.hpp) moves data through them with plain memcpy and reduce loops
// instead of UCX's single-copy CMA, whose page pinning runs at ~8 GB/s here against
// ~25 GB/s for an in-cache memcpy and stalls for milliseconds when the host is busy.
//
// Built once per world by the UCX communicator's connect(), after the transport is up:
// every rank creates its own segment, a barrier, every rank maps the others', a barrier,
// every rank unlinks its own name (the mappings stay; nothing is left in /dev/shm).
// The segments also hold the order of the all-reduces that use them (a ticket lane),
// which the progress engine's worker lock serialises.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/alias_offset.hpp"

namespace dseek::comm {

class SharedSegments {
 public:
  // Written by one rank, read by all: what it has published so far (chunk numbers).
  struct Flags {
    alignas(64) std::atomic<uint64_t> staged{0};   // its input of chunk v is in its staging area
    std::atomic<uint32_t> staged_at{0};            // ... that many bytes into the slot
    alignas(64) std::atomic<uint64_t> reduced{0};  // its shard of chunk v is in its result area
    std::atomic<uint32_t> reduced_at{0};           // ... that many bytes into the slot
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
                "flags are shared between processes");

  // `barrier` is a collective barrier over the world's ranks; `name_base` the same on
  // every rank of the world and unique to it. Throws CommError(transport) on failure.
  SharedSegments(int rank, int ranks, size_t chunk_bytes, const std::string& name_base,
                 const std::function<void()>& barrier);
  ~SharedSegments();
  SharedSegments(const SharedSegments&) = delete;
  SharedSegments& operator=(const SharedSegments&) = delete;

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  Flags& flags(int r) const;
  // Two slots per area: the all-reduce stages one chunk while the previous one is read.
  // A slot holds chunk_bytes() + kSlotSlack bytes.
  static constexpr int kSlots = 2;
  static constexpr size_t kSlotSlack = kAliasSlack;
  std::byte* staging(int r, int slot) const;
  std::byte* result(int r, int slot) const;

  // All-reduces through the segments run one at a time in issue order (the same order on
  // every rank): take a ticket when started, run while it is served.
  uint64_t take_ticket() { return next_ticket_++; }
  bool serving(uint64_t ticket) const { return serving_ == ticket; }
  void next_ticket_served() { ++serving_; }
  // Chunk numbers, consecutive over every all-reduce of the world (the flags' values).
  uint64_t next_chunk() { return ++chunks_; }

 private:
  void release();  // unmaps everything, unlinks the own name if still linked

  int rank_;
  int ranks_;
  size_t chunk_bytes_;
  size_t segment_bytes_;
  std::vector<std::byte*> bases_;
  std::string own_name_;
  bool own_linked_ = false;
  uint64_t next_ticket_ = 0, serving_ = 0, chunks_ = 0;
};

}  // namespace dseek::comm
