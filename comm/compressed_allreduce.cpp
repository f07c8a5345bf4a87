// The compressed all-reduce (see compressed_allreduce.hpp): encode, all-gather the
// messages, decode every rank's message in rank order.
#include "comm/compressed_allreduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dseek::comm {

CompressedAllReduce::CompressedAllReduce(CompressedAllReduceOptions options)
    : options_(std::move(options)),
      codec_(compression::make_codec(options_.codec, options_.topk_fraction, options_.int8_block_size)) {
  if (options_.error_feedback && codec_->id() != compression::CodecId::none)
    feedback_ = std::make_unique<compression::ErrorFeedback>(codec_);
}

CompressedAllReduce::CompressedAllReduce(std::string_view codec, double topk_fraction)
    : CompressedAllReduce(CompressedAllReduceOptions{std::string(codec), topk_fraction}) {}

void CompressedAllReduce::begin(Communicator& comm, const float* in, size_t n) {
  if (pending_.valid()) throw std::logic_error("CompressedAllReduce: begin() twice without finish()");
  if (!sized_) {
    n_ = n;
    sized_ = true;
  } else if (n != n_) {
    // The residual belongs to one buffer; mixing buffers would add one's error to another.
    throw std::invalid_argument("CompressedAllReduce: this object reduces buffers of " + std::to_string(n_) +
                                " elements, got " + std::to_string(n) + "; use one object per buffer");
  }
  const int size = comm.size();
  const size_t slot = codec_->max_encoded_bytes(n);
  // Grows only (a larger world size after an epoch change); never shrinks, never per call.
  if (gathered_.size() < static_cast<size_t>(size) * slot) gathered_.resize(static_cast<size_t>(size) * slot);
  std::byte* mine = gathered_.data() + static_cast<size_t>(comm.rank()) * slot;
  const size_t written = feedback_ ? feedback_->encode(in, n, mine) : codec_->encode(in, n, mine);
  if (written != slot)  // the all-gather relies on equal-size slots
    throw std::logic_error("CompressedAllReduce: codec " + std::string(codec_->name()) + " wrote " +
                           std::to_string(written) + " bytes, announced " + std::to_string(slot));
  // In place: this rank's shard of the u8 buffer is its own slot (shard_count of
  // size * slot bytes is exactly slot for every rank).
  pending_ = comm.all_gather(mine, gathered_.data(), static_cast<size_t>(size) * slot, DataType::u8);
  pending_size_ = size;
  pending_n_ = n;
  pending_slot_ = slot;
}

void CompressedAllReduce::finish(float* out, ReduceOp op) {
  if (!pending_.valid()) throw std::logic_error("CompressedAllReduce: finish() without begin()");
  if (op != ReduceOp::sum && op != ReduceOp::avg) {
    pending_.wait();  // leave no operation writing into gathered_
    pending_ = Work();
    throw std::invalid_argument(std::string("CompressedAllReduce: reduce op ") + to_string(op) +
                                " is not supported (sum or avg)");
  }
  Work work = std::move(pending_);
  pending_ = Work();
  work.wait();
  const size_t n = pending_n_, slot = pending_slot_;
  const float alpha = op == ReduceOp::avg ? 1.0f / static_cast<float>(pending_size_) : 1.0f;
  std::fill(out, out + n, 0.0f);
  // Rank order on every rank: floating-point addition is not associative, and replicas
  // must get the same bits.
  for (int r = 0; r < pending_size_; ++r)
    codec_->decode_add(gathered_.data() + static_cast<size_t>(r) * slot, slot, out, n, alpha);

  last_ = CompressedTraffic{n * sizeof(float), slot, work.bytes_sent(), work.bytes_received(), 1};
  total_ += last_;
}

void CompressedAllReduce::all_reduce(Communicator& comm, const float* in, float* out, size_t n, ReduceOp op) {
  if (op != ReduceOp::sum && op != ReduceOp::avg)  // before encode: keep the residual untouched
    throw std::invalid_argument(std::string("CompressedAllReduce: reduce op ") + to_string(op) +
                                " is not supported (sum or avg)");
  begin(comm, in, n);
  finish(out, op);
}

std::span<const float> CompressedAllReduce::residual() const {
  return feedback_ ? feedback_->residual() : std::span<const float>{};
}

void CompressedAllReduce::reset_residual() {
  if (feedback_) feedback_->reset();
}

}  // namespace dseek::comm
