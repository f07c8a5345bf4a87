// Barrier: the dissemination algorithm. In round j every rank signals rank r + 2^j and
// waits for rank r - 2^j; after ceil(log2 N) rounds every rank has heard, directly or
// transitively, from every other.
#pragma once

#include "comm/operation.hpp"

namespace dseek::comm {

class Barrier final : public Operation {
 public:
  explicit Barrier(OpContext ctx) : Operation(std::move(ctx)) {}
  void start() override;
  bool advance() override;

 private:
  void post_round();
  int distance_ = 1;
  uint32_t round_ = 0;
  IoPtr send_, recv_;
  char out_token_ = 1, in_token_ = 0;  // one byte: some transports dislike empty messages
};

}  // namespace dseek::comm
