// Pipeline-parallel schedules as data: for P stages, m micro-batches and v model chunks
// per stage, the ordered list of forward and backward ops each stage runs in one
// optimizer step (GPipe, 1F1B, interleaved 1F1B as in Megatron-LM). The stage engine
// (pipeline/stage_trainer.hpp) executes these lists; a unit test
// (tests/unit/test_pipeline_schedule.cpp) simulates them.
//
// Model chunks: the model's layers are cut into V = P x v virtual stages; chunk c of
// stage s is virtual stage c * P + s (Megatron's interleaving, so consecutive virtual
// stages sit on consecutive workers and activations always move to the next worker).
// A forward of virtual stage g > 0 receives its input from virtual stage g - 1 and one
// of g < V - 1 sends its output to g + 1; a backward moves the gradient the other way.
//
// Communication model the schedules are built for (and the test's simulator checks): sends never
// block (the engine copies the tensor and posts the send), an op waits until its input
// has arrived. Receives are pre-posted at the start of the step in the order the peer
// sends them (message_order()), so the data plane's "k-th send matches k-th receive"
// rule holds even when a stage consumes messages in another order than they were sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/enums.hpp"

namespace dseek::train {

// parallel.schedule, parsed by the config loader (its names: "gpipe", "1f1b",
// "interleaved"; config::name_of).
using ScheduleKind = config::Schedule;

struct ScheduleShape {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int64_t stages = 1;          // P
  int64_t micro_batches = 1;   // m
  int64_t virtual_stages = 1;  // v, chunks per stage (interleaved only; 1 otherwise)

  int64_t chunks() const { return kind == ScheduleKind::interleaved ? virtual_stages : 1; }
  int64_t total_virtual_stages() const { return stages * chunks(); }
};

// Throws std::invalid_argument naming the config key when a shape cannot be scheduled
// (interleaved needs m % P == 0 and v >= 2; every count >= 1).
void check_schedule_shape(const ScheduleShape& shape);

enum class OpType { forward, backward };

struct PipelineOp {
  OpType type = OpType::forward;
  int64_t micro_batch = 0;
  int64_t chunk = 0;  // this stage's chunk, 0 .. v-1
  bool operator==(const PipelineOp&) const = default;
};

// One point-to-point tensor the schedule implies: the output of `type` of micro_batch
// on virtual stage `from_virtual` (an activation for forward, an input gradient for
// backward), consumed on the adjacent virtual stage.
struct PipelineMessage {
  OpType type = OpType::forward;
  int64_t micro_batch = 0;
  int64_t from_virtual = 0;
  bool operator==(const PipelineMessage&) const = default;
};

class PipelineSchedule {
 public:
  explicit PipelineSchedule(const ScheduleShape& shape);  // checks the shape

  const ScheduleShape& shape() const { return shape_; }
  // Stage s's ops in execution order.
  const std::vector<PipelineOp>& ops(int64_t stage) const { return ops_[static_cast<size_t>(stage)]; }

  int64_t virtual_stage(int64_t stage, int64_t chunk) const { return chunk * shape_.stages + stage; }
  int64_t stage_of(int64_t virtual_stage) const { return virtual_stage % shape_.stages; }
  int64_t chunk_of(int64_t virtual_stage) const { return virtual_stage / shape_.stages; }

  // The message an op needs before it can run (none for the first virtual stage's
  // forwards and the last one's backwards), and the one it produces.
  std::optional<PipelineMessage> input_of(int64_t stage, const PipelineOp& op) const;
  std::optional<PipelineMessage> output_of(int64_t stage, const PipelineOp& op) const;
  // The stage a message goes to.
  int64_t destination(const PipelineMessage& message) const;
  // The messages `from` sends to `to`, in the order it sends them (its op order).
  std::vector<PipelineMessage> message_order(int64_t from, int64_t to) const;

 private:
  ScheduleShape shape_;
  std::vector<std::vector<PipelineOp>> ops_;
};

// The idle fraction of a stage's step with uniform op costs and free communication:
// (P-1)/(m+P-1) for GPipe and 1F1B, (P-1)/(v*m+P-1) for interleaved 1F1B.
double theoretical_bubble(const ScheduleShape& shape);

}  // namespace dseek::train
