// The base of every collective and point-to-point operation: a state machine the
// progress thread drives. start() posts the first messages, advance() moves it on as
// messages complete and returns true when it is done; a failure is a thrown CommError.
// The helpers name messages by group rank and piece and count the bytes moved.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/group.hpp"
#include "comm/staging_pool.hpp"
#include "comm/transport.hpp"
#include "comm/types.hpp"
#include "comm/work.hpp"

namespace dseek::comm {

// What an operation runs against. The group and its sequence number are fixed when the
// caller issues the operation, so every rank numbers the same operation the same way.
struct OpContext {
  Transport* transport = nullptr;
  StagingPool* pool = nullptr;
  std::shared_ptr<const GroupInfo> group;
  CommOptions options;
  uint32_t seq = 0;
  std::shared_ptr<WorkState> work;    // where bytes are counted (shared by nested ops)
  std::shared_ptr<WorkState> totals;  // the communicator's running byte counters
};

class Operation {
 public:
  explicit Operation(OpContext ctx) : ctx_(std::move(ctx)) {}
  virtual ~Operation() = default;
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  virtual void start() = 0;
  virtual bool advance() = 0;
  // True for an operation that waits on memory a peer writes (shared memory) rather than
  // on the network: no event fd announces its progress, so the engine must not sleep long.
  virtual bool polls_memory() const { return false; }

  WorkState& work() const { return *ctx_.work; }
  const std::shared_ptr<WorkState>& work_ptr() const { return ctx_.work; }

 protected:
  const GroupInfo& group() const { return *ctx_.group; }
  int rank() const { return ctx_.group->index; }
  int ranks() const { return ctx_.group->size(); }
  StagingPool& pool() const { return *ctx_.pool; }
  const CommOptions& options() const { return ctx_.options; }

  // Collective messages of this operation to / from a group rank; `piece` tells the
  // messages of one operation apart (e.g. step * columns + column).
  IoPtr send_to(int group_rank, uint32_t piece, const void* data, size_t bytes);
  IoPtr recv_from(int group_rank, uint32_t piece, void* data, size_t bytes);
  // Point-to-point messages: `seq` is the per-pair sequence number.
  IoPtr p2p_send(int group_rank, uint32_t seq, const void* data, size_t bytes);
  IoPtr p2p_recv(int group_rank, uint32_t seq, void* data, size_t bytes);

  // True when `io` is finished (or empty); counts its bytes and empties it. Throws
  // CommError(peer_failed) when it failed.
  bool collect(IoPtr& io, bool is_send);
  // Counts bytes moved without the transport (shared memory).
  void count_moved(uint64_t sent, uint64_t received);

 private:
  OpContext ctx_;
};

}  // namespace dseek::comm
