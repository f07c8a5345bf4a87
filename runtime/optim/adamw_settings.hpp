// The AdamW settings a job config asks for: the [train] hyperparameters, and, with
// compressed gradients (comm.compression) and comm.variance_refresh_steps > 0, the step
// after which AdamW takes its second moment from the replicas' dense local gradients
// instead of the compressed ones (see adamw.hpp), with comm.compressed_beta1 as beta1.
// One function, so that every place that
// builds a job's optimizer (the trainer, a gradient shard) builds the same one.
#pragma once

#include "runtime/config/job_config.hpp"
#include "runtime/optim/adamw.hpp"

namespace dseek::optim {

// data_parallel: the optimizer of a replica whose gradients a GradientReducer reduces
// (only that one is given a second moment; a single-node trainer ignores [comm]).
AdamWSettings adamw_settings(const config::JobConfig& config, bool data_parallel);

// The second moment is given (estimated from dense local gradients) rather than computed
// from the reduced gradients: comm.compression is not "none" and
// comm.variance_refresh_steps > 0.
bool second_moment_from_local_gradients(const config::JobConfig& config);

}  // namespace dseek::optim
