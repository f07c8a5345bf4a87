// Loading a checkpoint for generation and export; see checkpoint_model.hpp.
#include "runtime/infer/checkpoint_model.hpp"

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/config/load.hpp"
#include "runtime/data/dataset_index.hpp"

namespace dseek::infer {

namespace fs = std::filesystem;
namespace ck = dseek::checkpoint;

model::GptShape shape_of(const config::ModelConfig& m) {
  return model::GptShape{
      .dim = m.dim, .layers = m.layers, .heads = m.heads, .context = m.context, .vocab = m.vocab};
}

namespace {
config::JobConfig recorded_config(const fs::path& dir, const ck::Manifest& manifest) {
  if (manifest.config_toml.empty())
    throw ck::CheckpointError(dir.string() + ": the manifest records no job config, so the "
                              "model's shape is unknown");
  try {
    return config::load_config_text(manifest.config_toml, (dir / ck::kManifestFile).string());
  } catch (const config::ConfigError& error) {
    throw ck::CheckpointError(dir.string() + ": the job config recorded in the manifest does "
                              "not load: " + error.what());
  }
}
}  // namespace

CheckpointModel load_checkpoint_model(
    const std::string& checkpoint, const fs::path& root,
    const std::function<void(const std::string&, const fs::path&)>& on_fallback) {
  // The shape comes from the config of the checkpoint that will be read: the one named,
  // or for "latest" the newest (an older one it falls back to must have the same shape,
  // else it fails to load, naming the tensor).
  fs::path first = checkpoint;
  if (checkpoint == "latest") {
    auto committed = ck::list_committed(root);
    if (committed.empty())
      throw ck::CheckpointError("no committed checkpoint under " +
                                fs::absolute(root).lexically_normal().string());
    first = committed.back().path;
  } else if (!fs::is_directory(first)) {
    throw ck::CheckpointError("no such checkpoint directory " +
                              fs::absolute(first).lexically_normal().string());
  }
  CheckpointModel model;
  model.config = recorded_config(first, ck::read_manifest(first));
  model.shape = shape_of(model.config.model);
  const model::ParamLayout layout(model.shape);
  auto loaded = ck::load_for_resume(checkpoint, root, layout, on_fallback);
  if (!loaded) throw ck::CheckpointError("no committed checkpoint under " + root.string());
  model.dir = loaded->dir;
  model.step = loaded->manifest.step;
  model.params = std::move(loaded->params);
  return model;
}

std::unique_ptr<data::Tokenizer> open_model_tokenizer(const CheckpointModel& model,
                                                      const std::string& override_name) {
  std::string name = override_name;
  std::string where = "--tokenizer";
  if (name.empty()) {
    const fs::path dir = model.config.data.dir;
    try {
      name = data::read_dataset_index(dir).tokenizer;
    } catch (const data::DataError& error) {
      throw data::DataError(std::string(error.what()) +
                            " (the data set the checkpoint was trained on, data.dir = " +
                            dir.string() + ", names its tokenizer; without it, give "
                            "--tokenizer bytes|gpt2|cl100k_base|FILE.model)");
    }
    where = (dir / data::kIndexFileName).string();
  }
  auto tokenizer = data::open_tokenizer(name);
  if (tokenizer->vocab_size() > static_cast<uint32_t>(model.shape.vocab))
    throw data::DataError(where + ": tokenizer " + tokenizer->name() + " has " +
                          std::to_string(tokenizer->vocab_size()) +
                          " ids, more than the model's vocabulary of " +
                          std::to_string(model.shape.vocab) + " (model.vocab)");
  return tokenizer;
}

}  // namespace dseek::infer
