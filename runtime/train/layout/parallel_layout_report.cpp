// Implementation of parallel_layout_report.hpp.
#include "runtime/train/layout/parallel_layout_report.hpp"

#include <sstream>
#include <string>

namespace dseek::train {

void report_parallel_layout(const ParallelGroups& groups, int world_rank,
                            metrics::EventLog& events, metrics::Progress& progress) {
  const std::string text = groups.describe();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) progress.line(line);
  const RankCoordinates me = groups.coordinates(world_rank);
  events.emit("parallel_layout",
              util::JsonLine().add("data", groups.data_size()).add("pipeline", groups.pipeline_size())
                  .add("tensor", groups.tensor_size()).add("world", groups.world())
                  .add("rank", world_rank).add("replica", me.data).add("stage", me.stage)
                  .add("tensor_rank", me.tensor).add("layout", text));
}

}  // namespace dseek::train
