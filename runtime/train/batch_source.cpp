// Implementation of batch_source.hpp.
#include "runtime/train/batch_source.hpp"

#include <string>

#include "runtime/model/init_rng.hpp"
#include "runtime/train/prefetch_queue.hpp"

namespace dseek::train {

namespace {
thread_local int64_t queue_depth_seen = -1;  // prefetch_queue.hpp
}  // namespace

void note_prefetch_queue_depth(int64_t steps_ready) { queue_depth_seen = steps_ready; }
int64_t prefetch_queue_depth() { return queue_depth_seen; }

namespace {
uint64_t samples_or_throw(const data::TokenDataset& dataset, const std::filesystem::path& dir,
                          int64_t context) {
  const uint64_t samples = data::samples_in(dataset.num_tokens(), context);
  if (samples == 0)
    throw data::DataError(dir.string() + ": " + std::to_string(dataset.num_tokens()) +
                          " tokens are too few for one sample of context " +
                          std::to_string(context) + " (+1 target)");
  return samples;
}
}  // namespace

DatasetBatches::DatasetBatches(const std::filesystem::path& dir, data::Split split,
                               uint64_t seed, int64_t context)
    : dataset_(data::TokenDataset::open(dir, split)),
      order_(seed, samples_or_throw(dataset_, dir, context)) {}

void DatasetBatches::fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count,
                          int64_t context, int32_t* inputs, int32_t* targets) {
  data::fill_batch(dataset_, order_, step, batch_size, first, count, context, inputs, targets);
}

void RandomBatches::fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count,
                         int64_t context, int32_t* inputs, int32_t* targets) {
  for (int64_t s = 0; s < count; ++s) {
    const uint64_t sequence = step * static_cast<uint64_t>(batch_size) + static_cast<uint64_t>(first + s);
    for (int64_t t = 0; t <= context; ++t) {
      const uint64_t key = sequence * static_cast<uint64_t>(context + 1) + static_cast<uint64_t>(t);
      const auto token = static_cast<int32_t>(model::splitmix64(seed_ ^ model::splitmix64(key)) %
                                              static_cast<uint64_t>(vocab_));
      if (t < context) inputs[s * context + t] = token;
      if (t > 0) targets[s * context + t - 1] = token;
    }
  }
}

}  // namespace dseek::train
