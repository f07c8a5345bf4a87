// What a resume does with a checkpoint's mixed-precision state
// (checkpoint/precision_state.hpp), given this run's train.precision. Shared by every
// trainer's checkpoint front end (state/checkpointing.hpp).
//
//   written fp8, resumed fp8          restored: the run continues exactly (on another
//                                     data-parallel size: each replica's amax histories
//                                     merged, PipelineStageTrainer::restore_precision_state)
//   written fp8, resumed fp32/bf16    ignored, with a note: bf16 and fp32 keep no loss
//                                     scale and no amax history; the weights and moments
//                                     are fp32 in every precision, so they resume as they are
//   written fp32/bf16, resumed fp8    fresh, with a note: train.loss_scale_init and empty
//                                     amax histories, as a new fp8 run starts
//   not recorded (an older checkpoint), resumed fp8
//                                     fresh, with a note (what every resume did before)
//   otherwise (no fp8 either side)    nothing to do
// Changing the precision between runs is a legitimate choice (say, finishing an fp8 run in
// bf16), so nothing here refuses; the note and the resumed event's precision_state say
// what happened.
#pragma once

#include "runtime/config/enums.hpp"

#include <string>

#include "runtime/checkpoint/precision_state.hpp"

namespace dseek::train {

struct PrecisionResume {
  bool restore = false;  // put the checkpoint's state into the trainer
  // "restored" | "ignored" | "fresh" | "none": the resumed event's precision_state
  // (the caller makes "restored" "merged" when the world's replica count differs).
  std::string outcome = "none";
  std::string note;  // a progress line, "" when there is nothing to say
};

PrecisionResume precision_resume(const checkpoint::PrecisionState& written,
                                 config::Precision precision);

}  // namespace dseek::train
