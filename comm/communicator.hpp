// The data plane's public interface: a Communicator connects one group of ranks in one
// world epoch and runs collectives and point-to-point transfers on host buffers.
//
// - Every operation is asynchronous: it returns a Work handle (work.hpp) at once; the
//   buffers must stay valid and untouched until the handle is done.
// - All ranks of the group must issue the same collectives in the same order.
// - Every operation has a deadline (CommOptions::op_timeout). A failure of any operation
//   (timeout, dead peer, abort()) fails every pending and future operation of the
//   communicator and of every communicator sharing its connections (its sub-groups):
//   build a new one for the next epoch.
// - Buffers of any length; f32 and bf16 (bf16 stored as uint16, reduced in fp32);
//   u8 for the operations that do not reduce.
//
// Backends: UCX (ucx/ucx_communicator.hpp; shared memory and TCP) and, when CUDA is
// found, NCCL (nccl/nccl_communicator.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/group.hpp"
#include "comm/types.hpp"
#include "comm/work.hpp"

namespace dseek::comm {

// Bytes this communicator (with its sub-groups' own counters separate) has moved.
struct CommCounters {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t operations = 0;  // operations issued
  // Data-plane messages of no group of this world (a stranger's, or another epoch's),
  // dropped (UCX: ucx_transport.hpp). Shared by a world's sub-groups.
  uint64_t dropped_messages = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // this process's rank in the group
  virtual int size() const = 0;
  virtual uint64_t epoch() const = 0;
  // The world rank of every group member, in group order.
  virtual const std::vector<int>& world_ranks() const = 0;

  // out = reduction over ranks of in (count elements each). in == out is allowed.
  virtual Work all_reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op) = 0;
  Work all_reduce(void* buffer, size_t count, DataType type, ReduceOp op) {
    return all_reduce(buffer, buffer, count, type, op);
  }
  // in: `count` elements on every rank; out: this rank's shard of the reduction,
  // shard_count(count) elements starting at element shard_offset(count).
  virtual Work reduce_scatter(const void* in, void* out, size_t count, DataType type, ReduceOp op) = 0;
  // in: this rank's shard of a `count`-element buffer; out: the whole buffer on every
  // rank. `in` may point at this rank's shard inside `out` (in place).
  virtual Work all_gather(const void* in, void* out, size_t count, DataType type) = 0;
  // The root's buffer to every rank.
  virtual Work broadcast(void* buffer, size_t count, DataType type, int root) = 0;
  // Point to point: the k-th send to a peer matches the peer's k-th recv from this rank.
  virtual Work send(const void* data, size_t count, DataType type, int peer) = 0;
  virtual Work recv(void* data, size_t count, DataType type, int peer) = 0;
  virtual Work barrier() = 0;

  // Thread-safe: every pending and future operation fails at once with
  // ErrorKind::aborted (also those of communicators sharing its connections).
  virtual void abort(const std::string& reason) = 0;

  // A communicator for the ranks `group_ranks` (ranks of this group, in the order they
  // get in the new one). Every rank of THIS group must call subgroup() for every
  // sub-group, in the same order (like torch.distributed.new_group); members get the
  // new communicator, the others nullptr. No message is exchanged.
  virtual std::unique_ptr<Communicator> subgroup(const std::vector<int>& group_ranks) = 0;

  virtual CommCounters counters() const = 0;

  // The shard rule of reduce_scatter and all_gather.
  size_t shard_count(size_t count) const { return comm::shard_count(count, size(), rank()); }
  size_t shard_offset(size_t count) const { return comm::shard_offset(count, size(), rank()); }
};

}  // namespace dseek::comm
