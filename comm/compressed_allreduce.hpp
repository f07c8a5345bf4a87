// The compressed all-reduce: sums (or averages) one fp32 buffer over a group while
// moving only codec messages (comm/compression/codec.hpp) over the wire.
//
//   every rank:  message = encode(buffer + residual)      (error feedback, lossy codecs)
//                all_gather(messages)                      (DataType::u8, equal-size slots)
//                out = 0; for r in 0..N-1: decode_add(message[r], out, alpha)
//
// Compressed values cannot be summed on the wire, hence an all-gather of messages, not a
// reduce. Every rank decodes the same messages in the same (rank) order into a zeroed
// accumulator, so every rank gets a bit-identical result, as a data-parallel optimizer
// needs (replicas must not drift).
//
// One CompressedAllReduce per gradient buffer (e.g. per all-reduce bucket): it owns that
// buffer's error-feedback residual, so it must always be given the same buffer size. It
// does not own a Communicator: the caller passes the current one on every call, so the
// residual survives a new world epoch (a rebuilt communicator). Reuses its message
// buffers: no allocation per call once the largest world size was seen.
//
// Not thread-safe: one call at a time per object (objects for different buffers may run
// from different threads, each on its own communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/compression/codec.hpp"
#include "comm/compression/error_feedback.hpp"

namespace dseek::comm {

struct CompressedAllReduceOptions {
  std::string codec = "none";  // "none" | "topk" | "int8" | "topk+int8"
  double topk_fraction = 0.05;
  size_t int8_block_size = 256;
  // Carry what a lossy codec dropped into the next call (see error_feedback.hpp). Without
  // it the dropped part of every step is lost for good. Ignored for "none" (nothing is
  // dropped, so the residual pass would be wasted work).
  bool error_feedback = true;
};

// Bytes of the compressed all-reduce on this rank.
struct CompressedTraffic {
  uint64_t raw_bytes = 0;       // fp32 bytes reduced: 4n per call
  uint64_t encoded_bytes = 0;   // this rank's message: max_encoded_bytes(n) per call
  uint64_t bytes_sent = 0;      // what the all-gather actually sent from this rank
  uint64_t bytes_received = 0;  // ... and received (grows with the world size)
  uint64_t calls = 0;

  // 1 - encoded / raw: the fraction of the fp32 bytes the codec saved per rank.
  [[nodiscard]] double saved_fraction() const {
    return raw_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(encoded_bytes) / static_cast<double>(raw_bytes);
  }
  CompressedTraffic& operator+=(const CompressedTraffic& o) {
    raw_bytes += o.raw_bytes;
    encoded_bytes += o.encoded_bytes;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    calls += o.calls;
    return *this;
  }
};

class CompressedAllReduce {
 public:
  // Throws std::invalid_argument on an unknown codec or a bad parameter (make_codec).
  explicit CompressedAllReduce(CompressedAllReduceOptions options);
  CompressedAllReduce(std::string_view codec, double topk_fraction = 0.05);

  // out = sum (ReduceOp::sum) or mean (ReduceOp::avg) over the ranks of `comm` of in[0..n).
  // in == out is allowed. Blocking: returns once out holds the result. Every rank of the
  // group must call it with the same n, op and codec. Throws std::invalid_argument for
  // ReduceOp::max or an n other than the first call's (the residual is per buffer),
  // CommError when the all-gather fails, compression::CodecError on a corrupt message.
  // After a CommError the residual already assumes this call's message was delivered:
  // a caller that retries the step in a new epoch should reset_residual() (or restore it).
  void all_reduce(Communicator& comm, const float* in, float* out, size_t n, ReduceOp op);
  void all_reduce(Communicator& comm, float* buffer, size_t n, ReduceOp op) {
    all_reduce(comm, buffer, buffer, n, op);
  }

  // The two halves of all_reduce, so compute can overlap the exchange: begin() encodes
  // `in` (which may be reused as soon as it returns) and issues the all-gather; finish()
  // waits for it and decodes into out. Exactly one finish() per begin().
  void begin(Communicator& comm, const float* in, size_t n);
  void finish(float* out, ReduceOp op);

  [[nodiscard]] const CompressedTraffic& last() const { return last_; }    // the last call
  [[nodiscard]] const CompressedTraffic& total() const { return total_; }  // since construction
  [[nodiscard]] size_t message_bytes(size_t n) const { return codec_->max_encoded_bytes(n); }
  [[nodiscard]] const compression::Codec& codec() const { return *codec_; }
  [[nodiscard]] bool uses_error_feedback() const { return feedback_ != nullptr; }
  // This rank's residual (empty without error feedback or before the first call).
  [[nodiscard]] std::span<const float> residual() const;
  void reset_residual();

 private:
  CompressedAllReduceOptions options_;
  std::shared_ptr<compression::Codec> codec_;
  std::unique_ptr<compression::ErrorFeedback> feedback_;
  size_t n_ = 0;
  bool sized_ = false;
  // begin() state, consumed by finish().
  Work pending_;
  int pending_size_ = 0;
  size_t pending_n_ = 0;
  size_t pending_slot_ = 0;
  std::vector<std::byte> gathered_;  // size * slot bytes, rank r's message at r * slot
  CompressedTraffic last_, total_;
};

}  // namespace dseek::comm
