// Implementation of layout_training.hpp.
#include "actors/control/layout_training.hpp"

#include "dist/run_data_parallel.hpp"
#include "dist/run_pipeline.hpp"

namespace dseek::actors {

train::RunSummary train_on_layout(const train::SurvivorLayout& layout,
                                  comm::Communicator& communicator,
                                  const config::JobConfig& session,
                                  const train::RunOptions& options) {
  if (layout.pipeline > 1 || layout.tensor > 1)
    return dist::run_pipeline(session, options, communicator).run;
  return dist::run_data_parallel(session, options, communicator);
}

}  // namespace dseek::actors
