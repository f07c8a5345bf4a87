// Reading a checkpoint back: every shard's checksum is verified, shards are assembled
// by their slice offsets into full tensors (any number of shards per tensor, as written
// by any data-parallel layout, as long as together they cover each tensor exactly once),
// and the tensors are placed into the flat buffers of the reader's ParamLayout.
// Every failure is a CheckpointError naming the file and the tensor.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/manifest.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::checkpoint {

struct FullTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The full tensors of one role, in manifest order, verified.
std::vector<FullTensor> assemble(const std::filesystem::path& dir, const Manifest& manifest,
                                 Role role);

// Checks the marker, the manifest, every file size and every checksum; throws on the
// first problem. Returns the manifest.
Manifest verify(const std::filesystem::path& dir);

struct LoadedState {
  std::filesystem::path dir;
  Manifest manifest;
  std::vector<float> params, adam_m, adam_v;  // flat, in `layout`'s order
};

// Loads (and verifies) checkpoint `dir` into the flat layout of the reader's model; a
// tensor missing, unknown or of another shape is an error.
LoadedState load(const std::filesystem::path& dir, const model::ParamLayout& layout);

// Resolves checkpoint.resume: "latest" is the newest committed checkpoint under `root`
// that loads; each one that fails is reported through `on_fallback` (its error) before
// the previous one is tried. nullopt when "latest" finds no committed checkpoint at all.
// Any other value is a checkpoint directory, loaded as it is.
std::optional<LoadedState> load_for_resume(
    const std::string& resume, const std::filesystem::path& root,
    const model::ParamLayout& layout,
    const std::function<void(const std::string& error, const std::filesystem::path& next)>&
        on_fallback);

}  // namespace dseek::checkpoint
