// A trained model for generation and export: the parameters of a committed checkpoint
// (verified, runtime/checkpoint/load.hpp), the model shape from the config the job
// recorded in it, and the tokenizer of the data set it was trained on (data.dir's
// index names it: runtime/data/tokenizer.hpp).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/data/tokenizer.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::infer {

struct CheckpointModel {
  std::filesystem::path dir;   // the checkpoint directory loaded
  int64_t step = 0;
  config::JobConfig config;    // the job's config, as recorded in the checkpoint
  model::GptShape shape;
  std::vector<float> params;   // flat, in ParamLayout(shape)'s order
};

model::GptShape shape_of(const config::ModelConfig& model);

// `checkpoint` is a checkpoint directory, or "latest": the newest committed checkpoint
// under `root` that loads (each one that does not is reported through `on_fallback`
// before the one before it is tried). Throws checkpoint::CheckpointError naming the
// directory (none under root, a bad manifest or config, a tensor missing or of another
// shape than the recorded config says).
CheckpointModel load_checkpoint_model(
    const std::string& checkpoint, const std::filesystem::path& root,
    const std::function<void(const std::string& error, const std::filesystem::path& next)>&
        on_fallback);

// The tokenizer recorded in the index of the model's data set (config.data.dir), or
// the one named by `override_name` when it is not empty. Throws data::DataError naming
// the index when it cannot be read, and when the tokenizer's vocabulary is larger than
// the model's.
std::unique_ptr<data::Tokenizer> open_model_tokenizer(const CheckpointModel& model,
                                                      const std::string& override_name);

}  // namespace dseek::infer
