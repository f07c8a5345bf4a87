// The sample order (see sample_order.hpp): per epoch, a keyed Feistel permutation over
// the smallest power of four >= num_samples, with cycle walking to stay inside
// [0, num_samples). A Feistel network is a bijection whatever its round function, and
// cycle walking keeps it one on the subrange; the domain is under 4 x num_samples, so a
// lookup takes about four permutation steps on average.
#include "runtime/data/sample_order.hpp"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

namespace dseek::data {
namespace {

constexpr int kRounds = 6;

// splitmix64's finalizer: a fast, well-mixing 64-bit bijection.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

SampleOrder::SampleOrder(uint64_t seed, uint64_t num_samples)
    : seed_(seed), num_samples_(num_samples) {
  // Half the bits of the smallest power of four covering [0, num_samples).
  unsigned bits = num_samples <= 1 ? 0 : static_cast<unsigned>(std::bit_width(num_samples - 1));
  half_bits_ = std::max(1u, (bits + 1) / 2);
}

uint64_t SampleOrder::sample_at(uint64_t position) const {
  if (num_samples_ == 0) throw DataError("sample order over zero samples");
  if (num_samples_ == 1) return 0;
  const uint64_t epoch = position / num_samples_;
  const uint64_t key = mix64(seed_ ^ mix64(epoch + 0x9e3779b97f4a7c15ull));
  uint64_t round_keys[kRounds];
  for (int r = 0; r < kRounds; ++r) round_keys[r] = mix64(key + 0x632be59bd9b4e019ull * (r + 1));

  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = position % num_samples_;
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (int r = 0; r < kRounds; ++r) {
      uint64_t next = left ^ (mix64(right ^ round_keys[r]) & mask);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= num_samples_);
  return x;
}

uint64_t samples_in(uint64_t num_tokens, int64_t context) {
  if (context <= 0 || num_tokens <= static_cast<uint64_t>(context)) return 0;
  return (num_tokens - 1) / static_cast<uint64_t>(context);
}

void fill_batch(const TokenDataset& data, const SampleOrder& order, uint64_t step,
                int64_t batch_size, int64_t first, int64_t count, int64_t context,
                int32_t* inputs, int32_t* targets) {
  if (context <= 0) throw DataError("context must be positive, not " + std::to_string(context));
  if (batch_size <= 0 || first < 0 || count < 0 || first > batch_size - count) {
    throw DataError("batch slice [" + std::to_string(first) + ", +" + std::to_string(count) +
                    ") is not inside a batch of " + std::to_string(batch_size));
  }
  const uint64_t available = samples_in(data.num_tokens(), context);
  if (available == 0) {
    throw DataError("no training samples: a context of " + std::to_string(context) +
                    " tokens needs more than " + std::to_string(context) +
                    " tokens in the split, which has " + std::to_string(data.num_tokens()));
  }
  if (order.num_samples() == 0 || order.num_samples() > available) {
    throw DataError("sample order over " + std::to_string(order.num_samples()) +
                    " samples, but the split has " + std::to_string(available) +
                    " samples of context " + std::to_string(context));
  }
  const uint64_t ctx = static_cast<uint64_t>(context);
  std::vector<int32_t> window(ctx + 1);
  for (int64_t j = 0; j < count; ++j) {
    uint64_t position = step * static_cast<uint64_t>(batch_size) + static_cast<uint64_t>(first + j);
    uint64_t sample = order.sample_at(position);
    data.read(sample * ctx, ctx + 1, window.data());
    std::copy(window.begin(), window.end() - 1, inputs + j * context);
    std::copy(window.begin() + 1, window.end(), targets + j * context);
  }
}

}  // namespace dseek::data
