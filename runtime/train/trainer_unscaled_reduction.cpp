// Dynamic loss scaling (fp8) with a reducer that carries state between steps: gradient
// compression (comm.compression), whose error-feedback residuals and local second-moment
// estimate remember every step's gradients. Part of the Trainer (trainer.hpp); the
// uncompressed path unscales after the reduction instead (Trainer::apply_loss_scale).
//
// Why another order. Backward produces gradients multiplied by the step's loss scale.
// The uncompressed all-reduce forgets them once summed, so the trainer can decide and
// unscale afterwards. A codec does not forget: what it did not send is added to the
// next step's gradient, and the local second moment averages squares over steps. So:
//   - One scale: the gradients are divided by the loss scale BEFORE they reach the
//     reducer. The residuals and the estimate are then in the units of the unscaled
//     gradient, whatever the scale does between steps (it halves on an overflow and
//     doubles after train.loss_scale_window good steps). Rescaling the residuals on every
//     change instead would multiply their rounding, and the estimate would need the same.
//     The scale is a power of two: dividing changes no mantissa bits (barring underflow),
//     so the codecs see the bits the uncompressed path's optimizer sees.
//   - Overflow: an Inf or NaN must never enter a codec (the residual would carry it on,
//     or, reset to 0, lose that coordinate's history), and a skipped step must leave
//     every residual as it was on every replica. The decision therefore needs every
//     replica's whole local gradient before any bucket is encoded: each replica takes the
//     backend's sum of squares of its local gradient (one pass where the gradients live;
//     non-finite iff any element is) and the replicas sum one flag each (1 = overflow)
//     with the step's loss in one small collective (sum_over_ranks: rank order, the same
//     bits everywhere). Any flag skips the step on every replica: reducer skip_step()
//     (nothing issued, nothing encoded), the scale halves identically everywhere, and the
//     skipped step's loss is still reported. The decision is the LossScaler's, so the
//     scale sequence is the uncompressed path's for the same overflows.
//   - Cost: the reduction no longer overlaps backward (as ZeRO 1's does not): buckets are
//     issued after the decision, in backward order. Overlapping would need encoding
//     speculatively and undoing the residuals on a skip.
// The replicas reduce the same messages in rank order, so they keep identical bits and
// the replica checks pass; nothing new goes into checkpoints (the loss scale, the
// residuals and the estimate start afresh on resume and in every epoch, on every
// replica alike, as without fp8).
#include "runtime/train/trainer.hpp"

#include <array>
#include <cmath>
#include <limits>

namespace dseek::train {

bool Trainer::reduces_unscaled() const {
  return loss_scaler_ != nullptr && reducer_ != nullptr && reducer_->carries_state_between_steps();
}

bool Trainer::reduce_unscaled_if_finite(double local_loss,
                                        const model::GradientsReady& stage_and_reduce,
                                        StepReport& report) {
  report.precision = config::name_string(config_.train.precision);
  const float scale = loss_scaler_->scale();
  report.loss_scale = scale;
  const double local_squares = backend_->sum_squares(model_->grads(), model_->num_params());
  std::array<double, 2> sums{local_loss, std::isfinite(local_squares) ? 0.0 : 1.0};
  reducer_->sum_over_ranks(sums);
  report.loss = sums[0];
  if (!loss_scaler_->update_finite(sums[1] == 0.0)) {
    reducer_->skip_step();
    report.skipped = true;
    report.grad_norm = std::numeric_limits<double>::quiet_NaN();  // none: the event says null
    return false;
  }
  // The whole local gradient: every bucket goes through a codec (compression is ZeRO 0).
  backend_->scale(model_->grads(), model_->num_params(), 1.0f / scale);
  for (const auto& range : model_->gradient_ranges_in_backward_order()) stage_and_reduce(range);
  reducer_->finish();
  return true;
}

}  // namespace dseek::train
