// Imported weights as a step-0 checkpoint; see import_checkpoint.hpp.
#include "runtime/export/import_checkpoint.hpp"

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/write.hpp"
#include "runtime/config/load.hpp"

namespace dseek::exporting {

namespace fs = std::filesystem;

fs::path write_imported_checkpoint(const HfGpt2& model, config::JobConfig base,
                                   const fs::path& root) {
  if (!checkpoint::list_committed(root).empty())
    throw checkpoint::CheckpointError(
        root.string() + " already holds checkpoints: import into a new folder (a run's "
        "checkpoints/ before its first step)");
  base.model.dim = model.shape.dim;
  base.model.layers = model.shape.layers;
  base.model.heads = model.shape.heads;
  base.model.context = model.shape.context;
  base.model.vocab = model.shape.vocab;
  try {
    config::validate(base);
  } catch (const config::ConfigError& error) {
    throw checkpoint::CheckpointError(std::string("the imported model does not fit the job's "
                                                  "config: ") + error.what());
  }
  const model::ParamLayout layout(model.shape);
  checkpoint::Snapshot snapshot;
  snapshot.step = 0;
  snapshot.optimizer_steps = 0;
  snapshot.seed = base.train.seed;
  snapshot.config_toml = config::to_toml(base);
  snapshot.tensors = layout.tensors();
  snapshot.params = model.params;
  snapshot.adam_m.assign(layout.total(), 0.0f);
  snapshot.adam_v.assign(layout.total(), 0.0f);
  return checkpoint::write_checkpoint(snapshot, {.root = root}).path;
}

}  // namespace dseek::exporting
