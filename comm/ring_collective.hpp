// The bandwidth-optimal ring for large buffers: reduce-scatter (N-1 steps), all-gather
// (N-1 steps), and all-reduce as the two back to back. Each rank's shard is cut into
// chunk columns; up to pipeline_depth columns are in flight, so the reduce of one chunk
// overlaps the transfer of the next. Partial sums live in pooled staging slots, so the
// input is never modified unless it is also the output.
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class RingCollective final : public Operation {
 public:
  enum class Kind { all_reduce, reduce_scatter, all_gather };
  // all_reduce:     in, out: `count` elements (may be the same buffer)
  // reduce_scatter: in: `count` elements; out: this rank's shard (shard_count)
  // all_gather:     in: this rank's shard; out: `count` elements (in may alias its shard)
  // `scale` multiplies the reduced result (1/N for averages).
  RingCollective(OpContext ctx, Kind kind, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                 float scale);

  void start() override;
  bool advance() override;

 private:
  struct Column {
    size_t k = 0;  // chunk column index
    int step = 0;
    bool posted = false;
    bool active = false;
    StagingPool::Lease slot[2];  // partial sums, alternating between steps
    IoPtr send, recv;            // (after the slots: released first, while they are leased)
  };
  size_t seg_offset(int seg) const;
  size_t chunk_len(int seg, size_t k) const;
  std::byte* elem(void* base, size_t index) const;
  const std::byte* elem(const void* base, size_t index) const;
  int mod(int x) const { return ((x % ranks()) + ranks()) % ranks(); }
  void post(Column& c);
  void finish_step(Column& c);

  Kind kind_;
  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  size_t es_ = 0;
  size_t chunk_elems_ = 0;
  size_t columns_ = 0;
  int first_step_ = 0, end_step_ = 0, total_steps_ = 0;
  std::vector<Column> slots_;
  size_t done_columns_ = 0;
};

}  // namespace dseek::comm
