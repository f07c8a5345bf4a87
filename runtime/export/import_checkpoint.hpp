// `dseek ckpt import`: weights from another layout (the Hugging Face GPT-2 folder,
// hf_gpt2.hpp) as a dseek checkpoint at step 0, with zero AdamW moments, so that a job
// starts training from them with checkpoint.resume = that checkpoint (or
// `--resume PATH`), and `dseek generate` samples from them.
#pragma once

#include <filesystem>

#include "runtime/config/job_config.hpp"
#include "runtime/export/hf_gpt2.hpp"

namespace dseek::exporting {

// Writes root/step-00000000 (the checkpoint writer's atomic directory) and returns its
// path. `base` is the job's config (recorded in the checkpoint); its model keys are set
// from the imported shape. `root` must hold no committed checkpoint: an import never
// mixes with a run's own. Throws CheckpointError.
std::filesystem::path write_imported_checkpoint(const HfGpt2& model, config::JobConfig base,
                                                const std::filesystem::path& root);

}  // namespace dseek::exporting
