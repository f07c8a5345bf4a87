// Implementation of state_sync.hpp.
#include "dist/state_sync.hpp"

#include <array>

namespace dseek::dist {

namespace {

// Step counts travel as f32 (exact below 2^24 steps), so that the agreement uses the
// reduction the data plane has (max) without a new integer type.
float max_over_ranks(comm::Communicator& comm, float value) {
  comm.all_reduce(&value, 1, comm::DataType::f32, comm::ReduceOp::max).wait();
  return value;
}

void broadcast_floats(comm::Communicator& comm, std::vector<float>& buffer, int root) {
  comm.broadcast(buffer.data(), buffer.size(), comm::DataType::f32, root).wait();
}

}  // namespace

StateAgreement share_freshest_state(comm::Communicator& comm, train::TrainingState& state,
                                    size_t param_count) {
  StateAgreement agreement;
  const float freshest = max_over_ranks(comm, static_cast<float>(state.steps_done));
  agreement.steps_done = static_cast<int64_t>(freshest);
  if (agreement.steps_done < 0) return agreement;
  // The lowest rank with the freshest state: the max of (size - rank) over holders.
  const bool holder = state.steps_done == agreement.steps_done;
  const float best = max_over_ranks(
      comm, holder ? static_cast<float>(comm.size() - comm.rank()) : 0.0f);
  agreement.source_rank = comm.size() - static_cast<int>(best);
  const bool source = agreement.source_rank == comm.rank();
  std::array<float, 2> header = {static_cast<float>(state.steps_done),
                                 static_cast<float>(state.optimizer_steps)};
  comm.broadcast(header.data(), header.size(), comm::DataType::f32, agreement.source_rank).wait();
  if (!source) {
    state.steps_done = static_cast<int64_t>(header[0]);
    state.optimizer_steps = static_cast<int64_t>(header[1]);
    state.params.resize(param_count);
    state.adam_m.resize(param_count);
    state.adam_v.resize(param_count);
  }
  agreement.received = !holder;
  broadcast_floats(comm, state.params, agreement.source_rank);
  broadcast_floats(comm, state.adam_m, agreement.source_rank);
  broadcast_floats(comm, state.adam_v, agreement.source_rank);
  return agreement;
}

}  // namespace dseek::dist
