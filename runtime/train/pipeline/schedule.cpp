// Implementation of schedule.hpp. The op orders follow Megatron-LM's
// forward_backward_pipelining_{without,with}_interleaving.
#include "runtime/train/pipeline/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace dseek::train {

void check_schedule_shape(const ScheduleShape& s) {
  if (s.stages < 1) throw std::invalid_argument("parallel.pipeline must be >= 1");
  if (s.micro_batches < 1) throw std::invalid_argument("parallel.micro_batches must be >= 1");
  if (s.virtual_stages < 1) throw std::invalid_argument("parallel.virtual_stages must be >= 1");
  if (s.kind != ScheduleKind::interleaved) {
    if (s.virtual_stages != 1)
      throw std::invalid_argument(
          "parallel.virtual_stages = " + std::to_string(s.virtual_stages) +
          ": only parallel.schedule = \"interleaved\" runs several chunks per stage");
    return;
  }
  if (s.virtual_stages < 2)
    throw std::invalid_argument(
        "parallel.schedule = \"interleaved\" needs parallel.virtual_stages >= 2 (with 1 it is "
        "plain 1f1b)");
  // Megatron's interleaved order cycles through the stages in groups of P micro-batches.
  if (s.micro_batches % s.stages != 0)
    throw std::invalid_argument(
        "parallel.schedule = \"interleaved\" needs parallel.micro_batches (" +
        std::to_string(s.micro_batches) + ") to be a multiple of parallel.pipeline (" +
        std::to_string(s.stages) + ")");
}

namespace {

std::vector<PipelineOp> gpipe_ops(int64_t m) {
  std::vector<PipelineOp> ops;
  for (int64_t i = 0; i < m; ++i) ops.push_back({OpType::forward, i, 0});
  for (int64_t i = 0; i < m; ++i) ops.push_back({OpType::backward, i, 0});
  return ops;
}

// Warm-up forwards, then one forward and one backward alternately, then the remaining
// backwards: stage s holds at most P - s micro-batches' activations.
std::vector<PipelineOp> one_f_one_b_ops(int64_t P, int64_t m, int64_t s) {
  const int64_t warmup = std::min(P - s - 1, m);
  std::vector<PipelineOp> ops;
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({OpType::forward, next_forward, 0});
  while (next_forward < m) {
    ops.push_back({OpType::forward, next_forward++, 0});
    ops.push_back({OpType::backward, next_backward++, 0});
  }
  while (next_backward < m) ops.push_back({OpType::backward, next_backward++, 0});
  return ops;
}

// The k-th forward (or backward) of a stage in the interleaved order: micro-batches go
// in groups of P through chunk 0, then the same group through chunk 1, ...; backwards
// walk the chunks from the last.
PipelineOp interleaved_op(int64_t P, int64_t v, int64_t k, OpType type) {
  const int64_t in_group = k % (P * v);
  int64_t chunk = in_group / P;
  if (type == OpType::backward) chunk = v - 1 - chunk;
  return {type, (k / (P * v)) * P + k % P, chunk};
}

std::vector<PipelineOp> interleaved_ops(int64_t P, int64_t m, int64_t v, int64_t s) {
  const int64_t total = m * v;
  const int64_t warmup = m == P ? total : std::min((P - s - 1) * 2 + (v - 1) * P, total);
  std::vector<PipelineOp> ops;
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(interleaved_op(P, v, k, OpType::forward));
  for (int64_t k = 0; k < total - warmup; ++k) {
    ops.push_back(interleaved_op(P, v, warmup + k, OpType::forward));
    ops.push_back(interleaved_op(P, v, k, OpType::backward));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    ops.push_back(interleaved_op(P, v, k, OpType::backward));
  return ops;
}

}  // namespace

PipelineSchedule::PipelineSchedule(const ScheduleShape& shape) : shape_(shape) {
  check_schedule_shape(shape);
  for (int64_t s = 0; s < shape.stages; ++s) {
    switch (shape.kind) {
      case ScheduleKind::gpipe: ops_.push_back(gpipe_ops(shape.micro_batches)); break;
      case ScheduleKind::one_f_one_b:
        ops_.push_back(one_f_one_b_ops(shape.stages, shape.micro_batches, s));
        break;
      case ScheduleKind::interleaved:
        ops_.push_back(interleaved_ops(shape.stages, shape.micro_batches, shape.virtual_stages, s));
        break;
    }
  }
}

std::optional<PipelineMessage> PipelineSchedule::input_of(int64_t stage, const PipelineOp& op) const {
  const int64_t g = virtual_stage(stage, op.chunk);
  if (op.type == OpType::forward) {
    if (g == 0) return std::nullopt;
    return PipelineMessage{OpType::forward, op.micro_batch, g - 1};
  }
  if (g == shape_.total_virtual_stages() - 1) return std::nullopt;
  return PipelineMessage{OpType::backward, op.micro_batch, g + 1};
}

std::optional<PipelineMessage> PipelineSchedule::output_of(int64_t stage, const PipelineOp& op) const {
  const int64_t g = virtual_stage(stage, op.chunk);
  if (op.type == OpType::forward && g == shape_.total_virtual_stages() - 1) return std::nullopt;
  if (op.type == OpType::backward && g == 0) return std::nullopt;
  return PipelineMessage{op.type, op.micro_batch, g};
}

int64_t PipelineSchedule::destination(const PipelineMessage& message) const {
  return stage_of(message.type == OpType::forward ? message.from_virtual + 1
                                                  : message.from_virtual - 1);
}

std::vector<PipelineMessage> PipelineSchedule::message_order(int64_t from, int64_t to) const {
  std::vector<PipelineMessage> messages;
  for (const PipelineOp& op : ops(from)) {
    const auto out = output_of(from, op);
    if (out && destination(*out) == to) messages.push_back(*out);
  }
  return messages;
}

double theoretical_bubble(const ScheduleShape& s) {
  const double p = static_cast<double>(s.stages);
  const double m = static_cast<double>(s.micro_batches);
  const double v = static_cast<double>(s.chunks());
  return (p - 1.0) / (v * m + p - 1.0);
}

}  // namespace dseek::train
