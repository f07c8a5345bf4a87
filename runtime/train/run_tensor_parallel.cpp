// Implementation of run_tensor_parallel.hpp.
#include "runtime/train/run_tensor_parallel.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "runtime/data/token_dataset.hpp"
#include "runtime/data/vocab_check.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/fixed_world_steps.hpp"
#include "runtime/train/gathered_checkpointing.hpp"
#include "runtime/train/parallel_layout_report.hpp"
#include "runtime/train/run_events.hpp"
#include "runtime/train/tensor_checkpoint_state.hpp"
#include "runtime/train/tensor_parallel_trainer.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::train {

RunSummary run_tensor_parallel(const config::JobConfig& config, const RunOptions& options,
                               model::TensorGroup& group, ReplicaGroup* replicas) {
  const auto& t = config.train;
  std::unique_ptr<metrics::EventLog> own_events;
  metrics::EventLog& events = open_run_events(config, options, own_events);
  metrics::Progress progress = open_run_progress(config, options);
  DatasetBatches train_batches(config.data.dir, data::Split::train, static_cast<uint64_t>(t.seed),
                               config.model.context);
  data::check_model_vocab(train_batches.dataset(), config.model.vocab);  // names both vocabularies
  auto val_batches = open_validation(config, progress);

  TensorParallelTrainer trainer(config, train_batches, group, replicas, options.backend,
                                options.optimizer_shards);
  const ParallelGroups layout(trainer.replicas(), 1, trainer.ranks());
  report_parallel_layout(layout, layout.rank_of({trainer.replica(), 0, trainer.rank()}), events,
                         progress);
  util::JsonLine started;
  started.add("config", config.source).add("pid", static_cast<int64_t>(::getpid()))
      .add("tensor_rank", trainer.rank()).add("tensor", trainer.ranks())
      .add("replica", trainer.replica()).add("replicas", trainer.replicas())
      .add("shard_params", static_cast<uint64_t>(trainer.shard_params()))
      .add("zero", trainer.shards_optimizer_state() ? config.parallel.zero : int64_t{0})
      .add("optimizer_params", static_cast<uint64_t>(trainer.optimizer_params()))
      .add("optimizer", trainer.optimizer_description())
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("batch_size", t.batch_size).add("steps", t.steps).add("threads", t.threads)
      .add("data", config.data.dir);
  events.emit("run_started", started);
  if (trainer.shards_optimizer_state())
    progress.line("tensor rank " + std::to_string(trainer.rank()) +
                  ": optimizer state sharded over the data group (ZeRO " +
                  std::to_string(config.parallel.zero) + ", " + std::to_string(trainer.replicas()) +
                  " replicas): AdamW moments of " + std::to_string(trainer.optimizer_params()) +
                  " parameters here (the shard has " + std::to_string(trainer.shard_params()) +
                  "), updated by " + trainer.optimizer_description());
  report_model_memory(events, progress, "", config.model, trainer.activation_memory());

  TensorCheckpointState checkpoint_state(trainer);
  GatheredCheckpointing checkpoints(config, options.run_dir, checkpoint_state, events, progress,
                                    options.checkpoint_sink);
  const int64_t first_step = checkpoints.resume();

  FixedWorldSteps steps;
  steps.train_step = [&](int64_t step) {
    const StepReport r = trainer.train_step(step);
    events.emit("step", step_event_fields(step + 1, r).add("tensor_rank", trainer.rank())
                            .add("replica", trainer.replica()));
    return r;
  };
  if (val_batches)
    steps.evaluate = [&] { return trainer.evaluate(*val_batches, t.eval_batches); };
  steps.sum_votes = [&trainer](double vote) { return trainer.sum_over_group(vote); };
  std::string stop_reason;
  RunSummary summary = run_fixed_world_steps(config, options, events, progress, checkpoints,
                                             first_step, steps, stop_reason);
  const std::vector<float> params = trainer.gather_params();
  summary.params_sha256 = util::sha256_hex(params.data(), params.size() * sizeof(float));
  emit_run_end(events, summary, stop_reason);
  progress.line(run_end_line("tensor rank " + std::to_string(trainer.rank()) + " ", summary, false));
  return summary;
}

}  // namespace dseek::train
