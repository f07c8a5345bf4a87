// Implementation of check_job.hpp.
#include "runtime/train/check_job.hpp"

#include "runtime/config/load.hpp"
#include "runtime/train/pipeline/plan.hpp"

namespace dseek::train {

void check_job(const config::JobConfig& config) {
  config::check_supported(config);
  if (config.parallel.pipeline > 1) schedule_shape_of(config);
}

}  // namespace dseek::train
