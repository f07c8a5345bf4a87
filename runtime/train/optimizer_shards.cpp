// Implementation of optimizer_shards.hpp.
#include "runtime/train/optimizer_shards.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dseek::train {

namespace {
[[noreturn]] void no_chunked_update(const char* call) {
  throw std::logic_error(std::string("OptimizerShards::") + call + ": this optimizer does not "
                         "update in chunks (updates_in_chunks() is false); the trainer uses "
                         "the overlap of train.offload_overlap only with one that does");
}
}  // namespace

void OptimizerShards::start_update(float*, const float*, double, double,
                                   const std::vector<model::ParamRange>&) {
  no_chunked_update("start_update");
}
bool OptimizerShards::chunk_updated(size_t) const { no_chunked_update("chunk_updated"); }
void OptimizerShards::wait_for_chunk(size_t) { no_chunked_update("wait_for_chunk"); }
optim::StepStats OptimizerShards::finish_update() { no_chunked_update("finish_update"); }

namespace {
optim::AdamW adamw_of(const OptimizerSpec& spec) {
  if (spec.decay_ranges.empty()) return optim::AdamW(spec.backend, spec.layout, spec.settings, spec.owned);
  return optim::AdamW(spec.backend, spec.settings, spec.decay_ranges);
}
}  // namespace

LocalOptimizer::LocalOptimizer(const OptimizerSpec& spec)
    : adamw_(adamw_of(spec)), backend_name_(spec.backend.name()) {}

std::unique_ptr<OptimizerShards> make_optimizer_of(const OptimizerShardsFactory& factory,
                                                         const OptimizerSpec& spec) {
  std::unique_ptr<OptimizerShards> optimizer;
  if (factory) optimizer = factory(spec);
  if (!optimizer) optimizer = std::make_unique<LocalOptimizer>(spec);
  return optimizer;
}

std::vector<optim::DecayRange> with_decay(const std::vector<model::ParamRange>& piece,
                                          const std::vector<optim::DecayRange>& owned) {
  std::vector<optim::DecayRange> result;
  result.reserve(piece.size());
  for (const model::ParamRange& range : piece) {
    const auto it = std::find_if(owned.begin(), owned.end(), [&](const optim::DecayRange& d) {
      return d.range.offset <= range.offset && range.end() <= d.range.end();
    });
    if (it == owned.end())
      throw std::invalid_argument("with_decay: a piece's range [" + std::to_string(range.offset) +
                                  ", " + std::to_string(range.end()) +
                                  ") lies in no owned range");
    result.push_back({range, it->decay});
  }
  return result;
}

optim::StepStats LocalOptimizer::update(float* params, const float* grads, double lr,
                                        double grad_norm) {
  return adamw_.step_with_norm(params, grads, lr, grad_norm);
}

void LocalOptimizer::moments_to_host(float* adam_m, float* adam_v) {
  adamw_.moments_to_host(adam_m, adam_v);
}

void LocalOptimizer::moments_from_host(const float* adam_m, const float* adam_v) {
  adamw_.moments_from_host(adam_m, adam_v);
}

std::vector<std::vector<model::ParamRange>> split_owned(
    const std::vector<model::ParamRange>& owned, int pieces, size_t align) {
  size_t total = 0;
  for (const auto& range : owned) total += range.count;
  align = std::max<size_t>(align, 1);
  const size_t wanted = static_cast<size_t>(std::max(pieces, 1));
  const size_t count = std::max<size_t>(1, std::min(wanted, total / align));
  // Piece p ends at element ceil(total * (p + 1) / count) of the owned elements, rounded
  // up to `align`; the last piece takes the rest.
  std::vector<std::vector<model::ParamRange>> result(count);
  size_t piece = 0, done = 0;
  auto piece_end = [&](size_t p) {
    if (p + 1 == count) return total;
    const size_t end = (total * (p + 1) + count - 1) / count;
    return std::min(total, (end + align - 1) / align * align);
  };
  for (const auto& range : owned) {
    size_t offset = range.offset, left = range.count;
    while (left > 0) {
      while (piece + 1 < count && done >= piece_end(piece)) ++piece;
      const size_t take = std::min(left, piece_end(piece) - done);
      result[piece].push_back(model::ParamRange{offset, take});
      offset += take;
      left -= take;
      done += take;
    }
  }
  result.erase(std::remove_if(result.begin(), result.end(),
                              [](const auto& ranges) { return ranges.empty(); }),
               result.end());
  return result;
}

}  // namespace dseek::train

namespace dseek::train {

std::vector<ChunkReport> chunk_reports(const std::vector<model::ParamRange>& piece,
                                       const std::vector<model::ParamRange>& chunks) {
  std::vector<ChunkReport> reports;
  for (size_t c = 0; c < chunks.size(); ++c) {
    size_t last_end = 0;
    for (const auto& range : piece) {
      const size_t begin = std::max(range.offset, chunks[c].offset);
      const size_t end = std::min(range.end(), chunks[c].end());
      if (begin < end) last_end = std::max(last_end, end);
    }
    if (last_end > 0) reports.push_back({c, last_end});
  }
  return reports;
}

std::vector<int> reports_per_chunk(const std::vector<std::vector<model::ParamRange>>& pieces,
                                   const std::vector<model::ParamRange>& chunks) {
  std::vector<int> counts(chunks.size(), 0);
  for (const auto& piece : pieces)
    for (const auto& report : chunk_reports(piece, chunks)) ++counts[report.chunk];
  return counts;
}

}  // namespace dseek::train
