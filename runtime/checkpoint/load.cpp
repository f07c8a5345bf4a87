// Implementation of load.hpp.
#include "runtime/checkpoint/load.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/data/mapped_file.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::checkpoint {

namespace fs = std::filesystem;

namespace {

// The data files of a checkpoint, mapped once and checked against the manifest's sizes.
class DataFiles {
 public:
  DataFiles(const fs::path& dir, const Manifest& manifest) : format_version_(manifest.format_version) {
    for (const auto& file : manifest.files) {
      const fs::path path = dir / file.name;
      try {
        files_.emplace(file.name, data::MappedFile::open(path));
      } catch (const data::DataError& error) {
        throw CheckpointError("cannot read checkpoint file " + path.string() + ": " + error.what());
      }
      const uint64_t size = files_.at(file.name).bytes().size();
      if (size != file.bytes) {
        std::string tensor;
        for (const auto& t : manifest.tensors) {
          if (t.file == file.name && t.byte_offset + t.slice_count * 4 > size) {
            tensor = ", tensor " + t.name + " (" + role_name(t.role) + ") lies past its end";
            break;
          }
        }
        throw CheckpointError("checkpoint file " + path.string() + " is " +
                              (size < file.bytes ? "truncated" : "too long") + ": " +
                              std::to_string(size) + " bytes, the manifest says " +
                              std::to_string(file.bytes) + tensor);
      }
    }
  }

  // The shard's bytes, checksum verified.
  const unsigned char* shard(const fs::path& dir, const TensorShard& t) const {
    const auto& file = files_.at(t.file);
    const unsigned char* bytes = file.bytes().data() + t.byte_offset;
    const uint64_t size = t.slice_count * sizeof(float);
    if (shard_checksum(t, bytes, size, format_version_) != t.xxhash64) {
      // Format 2 binds the checksum to the entry's name, shape and slice: a mismatch is
      // changed bytes, or bytes listed under another tensor's entry.
      throw CheckpointError("checkpoint " + dir.string() + ": checksum mismatch in file " +
                            (dir / t.file).string() + ", tensor " + t.name + " (" +
                            role_name(t.role) + ", bytes " + std::to_string(t.byte_offset) + ".." +
                            std::to_string(t.byte_offset + size) + ")" +
                            (format_version_ >= 2 ? ": the bytes are corrupt, or are not those "
                                                    "written for this tensor's name and shape"
                                                  : ""));
    }
    return bytes;
  }

 private:
  std::map<std::string, data::MappedFile> files_;
  uint32_t format_version_;
};

void require_committed(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) throw CheckpointError("no checkpoint directory " + dir.string());
  if (!fs::exists(dir / kCommittedFile, error)) {
    throw CheckpointError("checkpoint " + dir.string() + " is not committed (no " +
                          std::string(kCommittedFile) + " marker): its write did not finish");
  }
}

std::vector<FullTensor> assemble_from(const fs::path& dir, const Manifest& manifest,
                                      const DataFiles& files, Role role) {
  // Group the shards of each tensor, keeping the manifest's tensor order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TensorShard*>> shards;
  for (const auto& t : manifest.tensors) {
    if (t.role != role) continue;
    auto& list = shards[t.name];
    if (list.empty()) order.push_back(t.name);
    if (!list.empty() && list.front()->shape != t.shape) {
      throw CheckpointError("checkpoint " + dir.string() + ": shards of tensor " + t.name + " (" +
                            role_name(role) + ") disagree on its shape");
    }
    list.push_back(&t);
  }
  std::vector<FullTensor> out;
  for (const auto& name : order) {
    auto& list = shards[name];
    std::sort(list.begin(), list.end(),
              [](const auto* a, const auto* b) { return a->slice_offset < b->slice_offset; });
    FullTensor tensor{name, list.front()->shape, {}};
    const uint64_t full = list.front()->full_count();
    // The slices are checked to tile the tensor before its buffer is allocated: a
    // manifest may claim a shape far larger than the bytes its files hold.
    uint64_t covered = 0;
    for (const TensorShard* s : list) {
      if (s->slice_offset != covered) {
        throw CheckpointError("checkpoint " + dir.string() + ": shards of tensor " + name + " (" +
                              role_name(role) + ") " +
                              (s->slice_offset < covered ? "overlap" : "leave a gap") +
                              " at element " + std::to_string(std::min(covered, s->slice_offset)) +
                              " (file " + s->file + ")");
      }
      covered += s->slice_count;
    }
    if (covered != full) {
      throw CheckpointError("checkpoint " + dir.string() + ": shards of tensor " + name + " (" +
                            role_name(role) + ") cover " + std::to_string(covered) + " of " +
                            std::to_string(full) + " elements");
    }
    tensor.values.resize(full);
    for (const TensorShard* s : list)
      std::memcpy(tensor.values.data() + s->slice_offset, files.shard(dir, *s),
                  s->slice_count * sizeof(float));
    out.push_back(std::move(tensor));
  }
  return out;
}

void place(const fs::path& dir, const std::vector<FullTensor>& tensors,
           const model::ParamLayout& layout, Role role, std::vector<float>& flat) {
  flat.assign(layout.total(), 0.0f);
  std::map<std::string, const FullTensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t;
  for (const auto& expected : layout.tensors()) {
    auto found = by_name.find(expected.name);
    if (found == by_name.end()) {
      throw CheckpointError("checkpoint " + dir.string() + " has no tensor " + expected.name +
                            " (" + role_name(role) + ") that this model needs");
    }
    if (found->second->shape != expected.shape) {
      throw CheckpointError("checkpoint " + dir.string() + ": tensor " + expected.name + " (" +
                            role_name(role) + ") has another shape than this model's: the "
                            "checkpoint was written by a different model config");
    }
    std::memcpy(flat.data() + expected.offset, found->second->values.data(),
                expected.size() * sizeof(float));
    by_name.erase(found);
  }
  if (!by_name.empty()) {
    throw CheckpointError("checkpoint " + dir.string() + " has tensor " + by_name.begin()->first +
                          " (" + role_name(role) + ") that this model does not have");
  }
}

}  // namespace

std::vector<FullTensor> assemble(const fs::path& dir, const Manifest& manifest, Role role) {
  DataFiles files(dir, manifest);
  return assemble_from(dir, manifest, files, role);
}

Manifest verify(const fs::path& dir) {
  require_committed(dir);
  Manifest manifest = read_manifest(dir);
  DataFiles files(dir, manifest);
  for (const auto& t : manifest.tensors) files.shard(dir, t);
  for (Role role : {Role::param, Role::adam_m, Role::adam_v}) assemble_from(dir, manifest, files, role);
  return manifest;
}

LoadedState load(const fs::path& dir, const model::ParamLayout& layout) {
  require_committed(dir);
  LoadedState state;
  state.dir = dir;
  state.manifest = read_manifest(dir);
  DataFiles files(dir, state.manifest);
  place(dir, assemble_from(dir, state.manifest, files, Role::param), layout, Role::param,
        state.params);
  place(dir, assemble_from(dir, state.manifest, files, Role::adam_m), layout, Role::adam_m,
        state.adam_m);
  place(dir, assemble_from(dir, state.manifest, files, Role::adam_v), layout, Role::adam_v,
        state.adam_v);
  return state;
}

std::optional<LoadedState> load_for_resume(
    const std::string& resume, const fs::path& root, const model::ParamLayout& layout,
    const std::function<void(const std::string&, const fs::path&)>& on_fallback) {
  if (resume != "latest") return load(resume, layout);
  auto committed = list_committed(root);
  if (committed.empty()) return std::nullopt;
  for (size_t i = committed.size(); i-- > 0;) {
    try {
      return load(committed[i].path, layout);
    } catch (const CheckpointError& error) {
      if (i == 0) {
        throw CheckpointError(std::string(error.what()) +
                              "; no older committed checkpoint to fall back to under " +
                              root.string());
      }
      on_fallback(error.what(), committed[i - 1].path);
    }
  }
  return std::nullopt;
}

}  // namespace dseek::checkpoint
