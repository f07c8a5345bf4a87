// Direct-exchange all-reduce (see direct_allreduce.hpp).
#include "comm/direct_allreduce.hpp"

#include <cstring>

#include "comm/reduce_kernels.hpp"

namespace dseek::comm {

DirectAllReduce::DirectAllReduce(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                                 float scale)
    : Operation(std::move(ctx)), in_(in), out_(out), count_(count), type_(type), op_(op), scale_(scale) {}

void DirectAllReduce::start() {
  require_reducible(type_);
  const int n = ranks(), r = rank();
  const size_t bytes = count_ * element_size(type_);
  inbox_ = pool().acquire(bytes * static_cast<size_t>(n));
  acc_ = pool().acquire(count_ * sizeof(float));
  for (int g = 0; g < n; ++g) {
    if (g == r) continue;
    sends_.push_back(send_to(g, 0, in_, bytes));
    recvs_.push_back(recv_from(g, 0, inbox_.data() + bytes * static_cast<size_t>(g), bytes));
  }
}

bool DirectAllReduce::advance() {
  bool all = true;
  for (auto& io : sends_) all = collect(io, true) && all;
  for (auto& io : recvs_) all = collect(io, false) && all;
  if (!all) return false;
  // Every send has completed, so writing `out` (which may be `in`) is safe now.
  const size_t bytes = count_ * element_size(type_);
  auto* acc = reinterpret_cast<float*>(acc_.data());
  for (int g = 0; g < ranks(); ++g) {
    const void* src = g == rank() ? in_ : static_cast<const void*>(inbox_.data() + bytes * static_cast<size_t>(g));
    accumulate_f32(acc, src, count_, type_, op_, g == 0);
  }
  store_from_f32(out_, acc, count_, type_, scale_);
  return true;
}

}  // namespace dseek::comm
