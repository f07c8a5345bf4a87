// Implementation of adamw_settings.hpp.
#include "runtime/optim/adamw_settings.hpp"

namespace dseek::optim {

bool second_moment_from_local_gradients(const config::JobConfig& config) {
  return config.comm.compression != config::Compression::none && config.comm.variance_refresh_steps > 0;
}

AdamWSettings adamw_settings(const config::JobConfig& config, bool data_parallel) {
  const auto& t = config.train;
  AdamWSettings settings{t.beta1, t.beta2, t.eps, t.weight_decay, t.grad_clip};
  // The warm-up steps reduce whole gradients: AdamW's own v is right for them.
  // Error feedback delivers a coordinate's gradient late, as a sum: it already smooths
  // like a momentum, and train.beta1's momentum on top of it lags further (measured:
  // bench/RESULTS.md, compression).
  if (data_parallel && second_moment_from_local_gradients(config)) {
    settings.given_second_moment_after = config.comm.compression_warmup_steps;
    settings.given_beta1 = config.comm.compressed_beta1;  // the warm-up steps keep train.beta1
  }
  return settings;
}

}  // namespace dseek::optim
