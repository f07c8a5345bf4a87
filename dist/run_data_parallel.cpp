// Implementation of run_data_parallel.hpp.
#include "dist/run_data_parallel.hpp"

#include "dist/comm_gradient_reducer.hpp"

namespace dseek::dist {

train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm) {
  return run_data_parallel(config, std::move(options), comm, reducer_settings(config));
}

train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm, ReducerSettings settings) {
  if (!settings.after_first_bucket) settings.after_first_bucket = options.during_reduction;
  CommGradientReducer reducer(comm, settings);
  options.reducer = &reducer;
  return train::run_training(config, options);
}

}  // namespace dseek::dist
