// Implementation of model_of_config.hpp.
#include "runtime/train/model_of_config.hpp"

#include <stdexcept>

namespace dseek::train {

model::GptShape shape_of(const config::ModelConfig& m) {
  return model::GptShape{m.dim, m.layers, m.heads, m.context, m.vocab};
}

model::RecomputePolicy recompute_of(const config::ModelConfig& m) {
  if (auto policy = model::parse_recompute_policy(m.recompute)) return *policy;
  throw std::invalid_argument("model.recompute: expected \"none\" or \"every:N\" with an "
                              "integer N >= 1, got \"" + m.recompute + "\"");
}

}  // namespace dseek::train
