// The mixed-precision training state a checkpoint keeps, so that a resumed
// train.precision = "fp8" run continues the run it resumes: the dynamic loss scaler's
// scale and its count of good steps since the last change (optim/loss_scaler.hpp), and
// the delayed-scaling state (amax histories, scales) of every fp8 matmul operand
// (numerics/delayed_scaling.hpp). Without them a resumed run restarts at the initial
// loss scale (its overflowed steps are skipped: their batches are not learned) and
// quantizes its first fp8 matmuls from an empty history.
//
// It lives in the manifest (schemas/checkpoint_manifest.capnp: lossScale, precision): a
// few floats per fp8 operand. fp32 and bf16 runs record their precision and no state.
// A checkpoint written before this existed reads as precision "" (not recorded): the
// resume starts the state fresh, as it always did (train/state/precision_resume.hpp decides).
// Not kept: the error-feedback residuals of gradient compression (a codec's memory, not
// the model's; a resumed compressed run starts them at zero, as a restarted one does).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/numerics/delayed_scaling.hpp"

namespace dseek::checkpoint {

struct PrecisionState {
  std::string precision;              // train.precision that wrote it; "": not recorded
  double loss_scale = 1.0;            // 1: no loss scaling (fp32, bf16)
  int64_t loss_scale_good_steps = 0;  // good steps since the scale last changed
  numerics::DelayedScalingState fp8;  // empty unless fp8
};

}  // namespace dseek::checkpoint
