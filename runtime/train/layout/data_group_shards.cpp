// Implementation of data_group_shards.hpp.
#include "runtime/train/layout/data_group_shards.hpp"

#include <algorithm>

namespace dseek::train {

DataGroupShards::DataGroupShards(ReplicaGroup& group, std::vector<model::ParamRange> runs)
    : group_(group), runs_(std::move(runs)) {
  for (const model::ParamRange& run : runs_) {
    run_floats_ += run.count;
    const model::ParamRange piece = group_.piece_of(run.count);
    if (piece.count == 0) continue;
    pieces_.push_back({run.offset + piece.offset, piece.count});
    piece_floats_ += piece.count;
  }
}

void DataGroupShards::reduce_scatter(float* buffer) {
  for (const model::ParamRange& run : runs_) group_.reduce_scatter(buffer + run.offset, run.count);
}

void DataGroupShards::all_gather(float* buffer) {
  for (const model::ParamRange& run : runs_) group_.all_gather(buffer + run.offset, run.count);
}

std::vector<model::ParamRange> DataGroupShards::within_pieces(
    const std::vector<model::ParamRange>& ranges) const {
  std::vector<model::ParamRange> inside;
  for (const model::ParamRange& range : ranges)
    for (const model::ParamRange& piece : pieces_) {
      const size_t begin = std::max(range.offset, piece.offset);
      const size_t end = std::min(range.end(), piece.end());
      if (begin < end) inside.push_back({begin, end - begin});
    }
  return inside;
}

std::vector<model::ParamRange> runs_cut_at(const std::vector<model::ParamRange>& runs,
                                           model::ParamRange cut) {
  std::vector<model::ParamRange> result;
  for (const model::ParamRange& run : runs) {
    size_t at = run.offset;
    for (const size_t edge : {cut.offset, cut.end()})
      if (edge > at && edge < run.end()) {
        result.push_back({at, edge - at});
        at = edge;
      }
    result.push_back({at, run.end() - at});
  }
  return result;
}

}  // namespace dseek::train
