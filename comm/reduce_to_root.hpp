// Reduce to one root: every other rank sends its buffer to the root in chunks; the root
// adds the contributions in rank order in fp32 as each chunk column arrives. Used for
// the intra-host step of the hierarchical all-reduce (few ranks, shared memory).
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class ReduceToRoot final : public Operation {
 public:
  // Non-roots read `in`; the root reads `in` and writes `out` (may be the same buffer).
  ReduceToRoot(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op, int root);
  void start() override;
  bool advance() override;

 private:
  struct Column {
    size_t k = 0;
    bool active = false, posted = false;
    StagingPool::Lease inbox;  // root: one chunk per rank
    StagingPool::Lease acc;    // root: fp32 partial sums
    std::vector<IoPtr> ios;    // (after the leases: released first, while they are leased)
  };
  void post(Column& c, uint32_t piece);
  void reduce(Column& c);

  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  int root_;
  size_t es_ = 0, chunk_elems_ = 0, columns_ = 0, done_columns_ = 0;
  std::vector<Column> slots_;
};

}  // namespace dseek::comm
