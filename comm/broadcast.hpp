// Broadcast from one root. Small buffers: the root sends to every rank directly (one
// hop). Large buffers: a pipelined chain root -> root+1 -> ... where each rank forwards
// chunk k while chunk k+1 arrives, so the time is about one buffer transfer whatever N.
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class Broadcast final : public Operation {
 public:
  Broadcast(OpContext ctx, void* buffer, size_t bytes, int root);
  void start() override;
  bool advance() override;

 private:
  struct Column {
    size_t k = 0;
    bool active = false, received = false, posted_recv = false, posted_send = false;
    IoPtr send, recv;
  };
  bool advance_direct();
  bool advance_chain();

  std::byte* buffer_;
  size_t bytes_;
  int root_;
  bool chain_ = false;
  size_t chunk_ = 0, columns_ = 0, done_columns_ = 0;
  int pos_ = 0;  // distance from the root along the chain
  std::vector<Column> slots_;
  std::vector<IoPtr> direct_;
};

}  // namespace dseek::comm
