// Pipeline schedules (runtime/train/pipeline/schedule.hpp) simulated (below) in the stage
// engine's communication model: every schedule runs to the end without deadlock for a
// range of (P, m, v); with uniform op costs and free communication the simulated idle
// fraction equals the theory exactly ((p-1)/(m+p-1), (p-1)/(v*m+p-1) interleaved; the
// simulation adds and subtracts a few small integers and thirds, so 1e-9 absolute);
// 1F1B keeps at most P - s micro-batches' activations on stage s where GPipe keeps m;
// shapes that cannot be scheduled are refused naming the key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/train/pipeline/schedule.hpp"

using namespace dseek::train;
namespace config = dseek::config;
using Catch::Matchers::Contains;

namespace {
constexpr double kExact = 1e-9;

// Cost of one op of a whole stage's layers; an interleaved chunk costs 1/v of it.
struct OpCosts {
  double forward = 1.0;
  double backward = 2.0;
};

struct SimulatedStep {
  bool deadlock = false;
  std::string problem;               // why the schedule is invalid; "" when it ran
  double makespan = 0.0;             // all stages done
  std::vector<double> busy;          // per stage
  std::vector<double> bubble;        // per stage: 1 - busy / makespan
  std::vector<int64_t> max_in_flight;  // per stage: most micro-batch chunks forwarded, not yet backwarded
};

// Runs the schedule in schedule.hpp's communication model: each op starts when its stage
// is free and its input message has arrived. Reports a deadlock (no stage can go on) or a
// malformed schedule (an op twice, missing, a backward before its forward) in `problem`.
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

SimulatedStep run(ScheduleKind kind, int64_t P, int64_t m, int64_t v, OpCosts costs = {}) {
  const PipelineSchedule schedule(ScheduleShape{kind, P, m, v});
  SimulatedStep step = simulate(schedule, costs);
  INFO(config::name_of(kind) << " P=" << P << " m=" << m << " v=" << v << ": " << step.problem);
  REQUIRE(step.problem.empty());
  REQUIRE_FALSE(step.deadlock);
  return step;
}
}  // namespace

TEST_CASE("pipeline schedule: GPipe and 1F1B run without deadlock at the theoretical bubble",
          "[pipeline][schedule]") {
  for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    for (int64_t P : {1, 2, 3, 4, 8}) {
      for (int64_t m : {1, 2, 3, 4, 7, 8, 16}) {
        for (OpCosts costs : {OpCosts{1, 2}, OpCosts{1, 1}, OpCosts{2, 3}}) {
          const SimulatedStep step = run(kind, P, m, 1, costs);
          const double theory = theoretical_bubble({kind, P, m, 1});
          INFO(config::name_of(kind) << " P=" << P << " m=" << m);
          CHECK(step.makespan == Approx((m + P - 1) * (costs.forward + costs.backward)).margin(kExact));
          for (double bubble : step.bubble) CHECK(bubble == Approx(theory).margin(kExact));
        }
      }
    }
  }
}

TEST_CASE("pipeline schedule: interleaved 1F1B runs without deadlock at (p-1)/(v*m+p-1)",
          "[pipeline][schedule]") {
  for (int64_t P : {2, 3, 4}) {
    for (int64_t v : {2, 3, 4}) {
      for (int64_t groups : {1, 2, 3, 4}) {
        const int64_t m = groups * P;
        for (OpCosts costs : {OpCosts{1, 2}, OpCosts{1, 1}}) {
          const SimulatedStep step = run(ScheduleKind::interleaved, P, m, v, costs);
          const double theory = theoretical_bubble({ScheduleKind::interleaved, P, m, v});
          INFO("P=" << P << " m=" << m << " v=" << v << " backward " << costs.backward);
          for (double bubble : step.bubble) CHECK(bubble == Approx(theory).margin(kExact));
        }
      }
    }
  }
}

TEST_CASE("pipeline schedule: interleaving shrinks the bubble below 1F1B's", "[pipeline][schedule]") {
  for (int64_t P : {2, 4}) {
    for (int64_t m : {P, 2 * P, 4 * P}) {
      const double plain = run(ScheduleKind::one_f_one_b, P, m, 1).bubble[0];
      const SimulatedStep interleaved = run(ScheduleKind::interleaved, P, m, 2);
      INFO("P=" << P << " m=" << m);
      for (double bubble : interleaved.bubble) CHECK(bubble < plain);
    }
  }
}

TEST_CASE("pipeline schedule: 1F1B bounds the activations in flight by P, GPipe holds m",
          "[pipeline][schedule]") {
  for (int64_t P : {2, 4}) {
    for (int64_t m : {8, 16}) {
      const SimulatedStep one_f = run(ScheduleKind::one_f_one_b, P, m, 1);
      const SimulatedStep gpipe = run(ScheduleKind::gpipe, P, m, 1);
      for (int64_t s = 0; s < P; ++s) {
        CHECK(one_f.max_in_flight[static_cast<size_t>(s)] == P - s);
        CHECK(gpipe.max_in_flight[static_cast<size_t>(s)] == m);
      }
    }
  }
}

TEST_CASE("pipeline schedule: messages and their order", "[pipeline][schedule]") {
  const PipelineSchedule schedule({ScheduleKind::interleaved, 2, 4, 2});
  // Virtual stages 0 (s0 c0), 1 (s1 c0), 2 (s0 c1), 3 (s1 c1).
  CHECK(schedule.virtual_stage(0, 1) == 2);
  CHECK_FALSE(schedule.input_of(0, {OpType::forward, 0, 0}).has_value());
  CHECK(schedule.input_of(0, {OpType::forward, 1, 1}) == PipelineMessage{OpType::forward, 1, 1});
  CHECK(schedule.input_of(0, {OpType::backward, 1, 0}) == PipelineMessage{OpType::backward, 1, 1});
  CHECK_FALSE(schedule.output_of(1, {OpType::forward, 0, 1}).has_value());
  CHECK_FALSE(schedule.input_of(1, {OpType::backward, 0, 1}).has_value());
  // Each stage sends every micro-batch's tensors to the other: 3 messages per
  // micro-batch from stage 0 (F c0, F c1, B c1), 3 from stage 1 (F c0, B c0, B c1).
  for (int64_t from : {0, 1}) {
    const auto messages = schedule.message_order(from, 1 - from);
    CHECK(messages.size() == 12);
    for (const auto& message : messages) CHECK(schedule.destination(message) == 1 - from);
  }
}

TEST_CASE("pipeline schedule: shapes it cannot run are refused naming the key",
          "[pipeline][schedule]") {
  CHECK_THROWS_WITH(PipelineSchedule({ScheduleKind::interleaved, 4, 6, 2}),
                    Contains("parallel.micro_batches") && Contains("multiple of parallel.pipeline"));
  CHECK_THROWS_WITH(PipelineSchedule({ScheduleKind::interleaved, 2, 4, 1}),
                    Contains("parallel.virtual_stages >= 2"));
  CHECK_THROWS_WITH(PipelineSchedule({ScheduleKind::one_f_one_b, 2, 4, 2}),
                    Contains("parallel.virtual_stages"));
  CHECK_THROWS_WITH(PipelineSchedule({ScheduleKind::gpipe, 2, 0, 1}), Contains("parallel.micro_batches"));
  // Names are the config loader's (config::enum_from_name): "1f1b" is 1F1B, others none.
  CHECK(config::enum_from_name<ScheduleKind>("1f1b") == ScheduleKind::one_f_one_b);
  CHECK_FALSE(config::enum_from_name<ScheduleKind>("zb-h1").has_value());
}
