// The model a job config describes: its shape and recompute policy, as every trainer,
// the pipeline planner and the checkpoint readers build it.
#pragma once

#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/recompute_policy.hpp"

namespace dseek::train {

// The model shape of a config.
model::GptShape shape_of(const config::ModelConfig& model);
// Its model.recompute setting; std::invalid_argument naming the key when malformed (a
// config built in code that never went through validate()).
model::RecomputePolicy recompute_of(const config::ModelConfig& model);

}  // namespace dseek::train
