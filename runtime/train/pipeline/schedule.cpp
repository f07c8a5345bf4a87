// Implementation of schedule.hpp. The op orders follow Megatron-LM's
// forward_backward_pipelining_{without,with}_interleaving.
#include "runtime/train/pipeline/schedule.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

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

SimulatedStep simulate(const PipelineSchedule& schedule, const OpCosts& costs) {
  const ScheduleShape& shape = schedule.shape();
  const int64_t P = shape.stages;
  const double chunk_share = 1.0 / static_cast<double>(shape.chunks());
  SimulatedStep result;
  result.busy.assign(static_cast<size_t>(P), 0.0);
  result.bubble.assign(static_cast<size_t>(P), 0.0);
  result.max_in_flight.assign(static_cast<size_t>(P), 0);

  // Every (type, micro-batch, chunk) exactly once per stage, each backward after its forward.
  for (int64_t s = 0; s < P; ++s) {
    std::set<std::tuple<int, int64_t, int64_t>> seen;
    for (const PipelineOp& op : schedule.ops(s)) {
      if (op.micro_batch < 0 || op.micro_batch >= shape.micro_batches || op.chunk < 0 ||
          op.chunk >= shape.chunks() ||
          !seen.insert({static_cast<int>(op.type), op.micro_batch, op.chunk}).second) {
        result.problem = "stage " + std::to_string(s) + ": an op out of range or repeated";
        return result;
      }
      if (op.type == OpType::backward && !seen.count({0, op.micro_batch, op.chunk})) {
        result.problem = "stage " + std::to_string(s) + ": backward of micro-batch " +
                         std::to_string(op.micro_batch) + " before its forward";
        return result;
      }
    }
    if (static_cast<int64_t>(seen.size()) != 2 * shape.micro_batches * shape.chunks()) {
      result.problem = "stage " + std::to_string(s) + ": ops missing";
      return result;
    }
  }

  // List scheduling: an op starts at max(stage free, input arrival); a stage whose next
  // op's input has not been produced yet waits.
  std::map<std::tuple<int, int64_t, int64_t>, double> arrival;  // message -> time
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<double> free_at(static_cast<size_t>(P), 0.0);
  std::vector<int64_t> in_flight(static_cast<size_t>(P), 0);
  size_t remaining = 0;
  for (int64_t s = 0; s < P; ++s) remaining += schedule.ops(s).size();
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < P; ++s) {
      const auto su = static_cast<size_t>(s);
      const auto& ops = schedule.ops(s);
      while (next[su] < ops.size()) {
        const PipelineOp& op = ops[next[su]];
        double start = free_at[su];
        if (const auto in = schedule.input_of(s, op)) {
          auto it = arrival.find({static_cast<int>(in->type), in->micro_batch, in->from_virtual});
          if (it == arrival.end()) break;  // blocked on a receive
          start = std::max(start, it->second);
        }
        const double cost =
            (op.type == OpType::forward ? costs.forward : costs.backward) * chunk_share;
        free_at[su] = start + cost;
        result.busy[su] += cost;
        in_flight[su] += op.type == OpType::forward ? 1 : -1;
        result.max_in_flight[su] = std::max(result.max_in_flight[su], in_flight[su]);
        if (const auto out = schedule.output_of(s, op))
          arrival[{static_cast<int>(out->type), out->micro_batch, out->from_virtual}] = free_at[su];
        ++next[su];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      result.deadlock = true;
      result.problem = "deadlock: every unfinished stage waits for a message not yet sent";
      return result;
    }
  }
  result.makespan = *std::max_element(free_at.begin(), free_at.end());
  for (size_t s = 0; s < result.busy.size(); ++s)
    result.bubble[s] = 1.0 - result.busy[s] / result.makespan;
  return result;
}

}  // namespace dseek::train
