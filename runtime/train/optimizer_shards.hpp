// Where a replica's optimizer state lives and who runs its update: the trainer asks an
// OptimizerShards for one AdamW update of the parameters this replica owns (the whole
// buffer, or its ZeRO shard), given the global gradient norm it computed, and moves the
// moments to and from host memory for checkpoints and recovery.
//
// Two implementations: LocalOptimizer (below), one optim::AdamW run on the trainer's own
// thread and backend, the default for runtime-only users and tests/dp; and in dseek-node
// the node's gradient_shard actors (actors/worker_group/gradient_shard.hpp), which hold the
// moments of contiguous pieces of the owned ranges and update them in parallel. The
// trainer picks one per model chunk through an OptimizerShardsFactory
// (RunOptions::optimizer_shards, make_optimizer_of); the runtime sees only this
// interface, so it knows nothing of actors.
//
// Every implementation gives the same bits: an AdamW update is element-wise, so the
// pieces an update is cut into do not change its result (optim/adamw.hpp).
//
// The overlapped CPU offload (train.offload_overlap, host_update.hpp): an optimizer that
// updates_in_chunks() can also start an update and return at once (start_update); it
// then goes through the given chunks in layout order and reports each as it is done
// (chunk_updated / wait_for_chunk), so the trainer sends each chunk's parameters back to
// the device and the next step's forward starts on the first chunks while the CPU still
// updates later ones. finish_update() waits for the rest. The gradient_shard actors do
// this; LocalOptimizer runs on the trainer's own thread and cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/optim/adamw.hpp"

namespace dseek::train {

// What an optimizer is built for: the parameters' layout (for weight decay), AdamW's
// settings and the ranges of the flat buffer this replica owns (disjoint).
struct OptimizerSpec {
  backend::Backend& backend;  // the trainer's: where params and grads live
  const model::ParamLayout& layout;
  optim::AdamWSettings settings;
  std::vector<model::ParamRange> owned;
  // Host memory suited to the trainer backend's copies (Backend::host_memory(): pinned
  // for CUDA): where an optimizer that runs on the host keeps its moments. Null: its
  // own backend's default.
  std::shared_ptr<backend::HostMemory> host_memory = nullptr;
  // For a buffer `layout` does not describe (a tensor-parallel shard, whose elements
  // take the weight decay of the whole model's tensor they come from): the owned ranges
  // with their decay settings, the same ranges as `owned` in the same order; `layout`
  // then only has to outlive the spec. Empty: decay from `layout`.
  std::vector<optim::DecayRange> decay_ranges = {};
};

class OptimizerShards {
 public:
  virtual ~OptimizerShards() = default;
  // One AdamW step of the owned parameters from `grads` (both whole flat buffers) at
  // learning rate `lr`, clipping by `grad_norm` (the norm of the whole gradient).
  virtual optim::StepStats update(float* params, const float* grads, double lr,
                                  double grad_norm) = 0;
  // Moments to / from whole-buffer host arrays (layout order): owned ranges only.
  virtual void moments_to_host(float* adam_m, float* adam_v) = 0;
  virtual void moments_from_host(const float* adam_m, const float* adam_v) = 0;
  // The second moment to use from now on, when AdamW's settings give it
  // (optim::AdamWSettings::given_second_moment_after; compressed gradients): a whole-
  // buffer host array in layout order, read before the call returns.
  virtual void set_second_moment(const float* second_moment) = 0;
  // AdamW's step count (its bias correction); set when resuming.
  virtual int64_t steps_taken() const = 0;
  virtual void set_steps_taken(int64_t steps) = 0;
  // True when update() runs on host memory of its own backend (the gradient_shard actors,
  // single-threaded CPU backends: AdamW offloaded to the CPU) rather than on the
  // trainer's backend: its params and grads must then be host arrays, and the trainer
  // stages them when its backend's memory is not host memory (host_staging.hpp).
  virtual bool updates_on_host() const { return false; }
  // Who runs the update, for the run's report (run_started's "optimizer").
  virtual std::string describe() const = 0;

  // --- the overlapped update (see the top of this file) ------------------------------
  // Whether start_update() and the calls below are implemented.
  virtual bool updates_in_chunks() const { return false; }
  // Starts what update() does and returns at once. `chunks`: disjoint ranges of the flat
  // buffer in layout order (the owned ranges must be in that order too); the update goes
  // through them in this order. params and grads are not to be touched by the caller in
  // a chunk before it is updated, nor grads before finish_update().
  virtual void start_update(float* params, const float* grads, double lr, double grad_norm,
                            const std::vector<model::ParamRange>& chunks);
  // Whether chunk `chunk` (an index into start_update's chunks) is updated; no waiting.
  virtual bool chunk_updated(size_t chunk) const;
  // Blocks until it is (bounded); throws when the update cannot finish.
  virtual void wait_for_chunk(size_t chunk);
  // Waits for the whole started update; counts the step.
  virtual optim::StepStats finish_update();
};

// Makes a trainer's optimizer; may return null, meaning "use a LocalOptimizer".
using OptimizerShardsFactory =
    std::function<std::unique_ptr<OptimizerShards>(const OptimizerSpec& spec)>;

// The optimizer `factory` makes for `spec`, or a LocalOptimizer when it is empty or
// returns null. One that updates on the host gets host copies of the buffers from the
// trainer (host_update.hpp).
std::unique_ptr<OptimizerShards> make_optimizer_of(const OptimizerShardsFactory& factory,
                                                         const OptimizerSpec& spec);

// One optim::AdamW over the owned ranges, on the caller's thread and backend.
class LocalOptimizer final : public OptimizerShards {
 public:
  explicit LocalOptimizer(const OptimizerSpec& spec);
  optim::StepStats update(float* params, const float* grads, double lr,
                          double grad_norm) override;
  void moments_to_host(float* adam_m, float* adam_v) override;
  void moments_from_host(const float* adam_m, const float* adam_v) override;
  void set_second_moment(const float* second_moment) override {
    adamw_.set_second_moment(second_moment);
  }
  int64_t steps_taken() const override { return adamw_.steps_taken(); }
  void set_steps_taken(int64_t steps) override { adamw_.set_steps_taken(steps); }
  // "AdamW on cpu", "AdamW on cuda": the trainer's backend, where the moments live.
  std::string describe() const override { return "AdamW on " + backend_name_; }

 private:
  optim::AdamW adamw_;
  std::string backend_name_;
};

// Cuts `owned` (disjoint ranges, in order) into at most `pieces` pieces of nearly equal
// element counts, each a list of ranges, splitting a range where needed at multiples of
// `align` elements (from its start). No piece is empty; fewer pieces when there are
// fewer than `pieces` x `align` elements.
std::vector<std::vector<model::ParamRange>> split_owned(
    const std::vector<model::ParamRange>& owned, int pieces, size_t align = 16);

// `piece` (ranges each inside one range of `owned`, as split_owned cuts them) with the
// decay setting of the range it lies in; std::invalid_argument for a range outside.
std::vector<optim::DecayRange> with_decay(const std::vector<model::ParamRange>& piece,
                                          const std::vector<optim::DecayRange>& owned);

// The overlapped update: when a piece of it (its ranges, in layout order) may report
// each chunk it holds part of -- once its update passed `after`, the flat offset just
// past the piece's last element in that chunk. In chunk order; chunks the piece does not
// touch are left out.
struct ChunkReport {
  size_t chunk = 0;
  size_t after = 0;
  bool operator==(const ChunkReport&) const = default;
};
std::vector<ChunkReport> chunk_reports(const std::vector<model::ParamRange>& piece,
                                       const std::vector<model::ParamRange>& chunks);
// How many of `pieces` report each chunk (UpdateProgress::begin's argument).
std::vector<int> reports_per_chunk(const std::vector<std::vector<model::ParamRange>>& pieces,
                                   const std::vector<model::ParamRange>& chunks);

}  // namespace dseek::train
