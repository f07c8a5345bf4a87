// Point-to-point send and receive between two ranks of a group. The k-th send from A to
// B matches the k-th receive at B from A (per-pair sequence numbers in the tag), and
// point-to-point messages never match collective ones.
#pragma once

#include "comm/operation.hpp"

namespace dseek::comm {

class PointToPoint final : public Operation {
 public:
  // `is_send`: send `bytes` from `data` to `peer`; otherwise receive into `data` from `peer`.
  PointToPoint(OpContext ctx, bool is_send, int peer, uint32_t pair_seq, void* data, size_t bytes)
      : Operation(std::move(ctx)), is_send_(is_send), peer_(peer), pair_seq_(pair_seq), data_(data), bytes_(bytes) {}
  void start() override;
  bool advance() override { return collect(io_, is_send_); }

 private:
  bool is_send_;
  int peer_;
  uint32_t pair_seq_;
  void* data_;
  size_t bytes_;
  IoPtr io_;
};

}  // namespace dseek::comm
