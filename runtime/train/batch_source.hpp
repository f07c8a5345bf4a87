// Where a trainer's batches come from. A batch is a function of the step alone, so
// every worker of a job, whatever their number, can fill its own slice of the same
// global batch.
#pragma once

#include <cstdint>
#include <filesystem>

#include "runtime/data/sample_order.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Sequences [first, first + count) of the global batch of `step` (batch_size
  // sequences of `context` tokens): count x context inputs and targets.
  virtual void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count,
                    int64_t context, int32_t* inputs, int32_t* targets) = 0;
  // Every id of the batches is below it: a prepared data set's vocabulary (its index's),
  // which the model's loss takes as its real vocabulary when model.vocab pads it
  // (GptModel::set_real_vocab); 0 when the source does not know (then model.vocab).
  virtual int64_t vocab() const { return 0; }
};

// Samples of a prepared data set split, in the SampleOrder of (seed, step, index).
class DatasetBatches final : public BatchSource {
 public:
  DatasetBatches(const std::filesystem::path& dir, data::Split split, uint64_t seed,
                 int64_t context);
  void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override;
  const data::TokenDataset& dataset() const { return dataset_; }
  int64_t vocab() const override { return dataset_.vocab_size(); }

 private:
  data::TokenDataset dataset_;
  data::SampleOrder order_;
};

// Uniform random tokens, a pure function of (seed, step, sequence, position): for
// benchmarks, which time the model and not the data.
class RandomBatches final : public BatchSource {
 public:
  RandomBatches(uint64_t seed, int64_t vocab) : seed_(seed), vocab_(vocab) {}
  void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override;

 private:
  uint64_t seed_;
  int64_t vocab_;
};

}  // namespace dseek::train
