// Implementation of reducer_replica_group.hpp.
#include "support/reducer_replica_group.hpp"

#include <stdexcept>
#include <vector>

namespace dseek::testing {

using train::GradientReducer;
using train::ReducerTraffic;

namespace {

// The job's reducer under the chunk's ownership: every call forwarded, detached when the
// chunk goes (the reducer itself stays the job's).
class LentReducer final : public GradientReducer {
 public:
  explicit LentReducer(GradientReducer& reducer) : r_(reducer) {}
  ~LentReducer() override { r_.detach(); }
  int rank() const override { return r_.rank(); }
  int world_size() const override { return r_.world_size(); }
  bool reduces_backend_memory() const override { return r_.reduces_backend_memory(); }
  void bind_backend(backend::Backend& backend) override { r_.bind_backend(backend); }
  void attach(float* grads, size_t total, const std::vector<model::ParamRange>& order) override {
    r_.attach(grads, total, order);
  }
  void detach() noexcept override { r_.detach(); }
  const std::vector<model::ParamRange>& shard() const override { return r_.shard(); }
  void begin_step(int64_t step) override { r_.begin_step(step); }
  void gradients_ready(model::ParamRange range) override { r_.gradients_ready(range); }
  void finish() override { r_.finish(); }
  void skip_step() override { r_.skip_step(); }
  bool carries_state_between_steps() const override { return r_.carries_state_between_steps(); }
  void sum_over_ranks(std::span<double> values) override { r_.sum_over_ranks(values); }
  std::vector<uint64_t> gather_u64(uint64_t mine) override { return r_.gather_u64(mine); }
  void gather_shards(float* buffer) override { r_.gather_shards(buffer); }
  ReducerTraffic step_traffic() const override { return r_.step_traffic(); }
  const float* refreshed_second_moment() override { return r_.refreshed_second_moment(); }

 private:
  GradientReducer& r_;
};

}  // namespace

void ReducerReplicaGroup::sum(float* data, size_t count) {
  std::vector<double> values(data, data + count);
  reducer_.sum_over_ranks(values);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(values[i]);
}

std::unique_ptr<GradientReducer> ReducerReplicaGroup::make_gradient_reducer() {
  if (lent_)
    throw std::logic_error("ReducerReplicaGroup: the job's one reducer serves one model chunk");
  lent_ = true;
  return std::make_unique<LentReducer>(reducer_);
}

}  // namespace dseek::testing
