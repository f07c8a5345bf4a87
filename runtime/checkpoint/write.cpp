// Implementation of write.hpp.
#include "runtime/checkpoint/write.hpp"

#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/store.hpp"

namespace dseek::checkpoint {

namespace fs = std::filesystem;

// The data files are the in-memory floats as they are: that is the on-disk format only
// on a little-endian host.
static_assert(std::endian::native == std::endian::little, "checkpoint files are little-endian");

namespace {

double thread_cpu_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

// Test hook, not a user setting (so it is in no user documentation): when the variable
// DSEEK_TEST_CHECKPOINT_HOLD_STEP=N is set, the write of any step >= N pauses after its
// first data file, params.bin, is on disk and before the rest, for 60 s. This is a
// checkpoint caught mid-write, for tests/integration/test_checkpoint_nodes.cpp to kill
// the writing node there; without it the few milliseconds of a write are hard to hit.
// "Any step >= N": an asynchronous writer may skip step N while the last write runs.
void hold_for_tests(int64_t step) {
  const char* value = std::getenv("DSEEK_TEST_CHECKPOINT_HOLD_STEP");
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  const long long from = std::strtoll(value, &end, 10);
  if (*end != '\0' || step < from) return;
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

// A failed write on a full file system: the error (which names the file) plus what is
// free under `root` once the partial checkpoint is gone, and what one needs. Any other
// failure as it is.
std::string explain_full_disk(const std::string& error, const fs::path& root,
                              uint64_t needed_bytes) {
  std::error_code ignored;
  const auto space = fs::space(root, ignored);
  if (ignored || space.available >= needed_bytes) return error;
  return error + " (the file system of " + root.string() + " is full: " +
         std::to_string(space.available) + " bytes free, a checkpoint needs about " +
         std::to_string(needed_bytes) + "; the committed checkpoints are untouched)";
}

struct DataBuffer {
  const char* file;
  Role role;
  const std::vector<float>* values;
};

// Writes one flat buffer as a data file and adds one shard entry per tensor.
void write_buffer(const fs::path& dir, const DataBuffer& buffer, const Snapshot& snapshot,
                  bool fail_midway, bool hold, Manifest& manifest) {
  const fs::path path = dir / buffer.file;
  const auto& values = *buffer.values;
  const uint64_t bytes = values.size() * sizeof(float);
  for (const auto& tensor : snapshot.tensors) {
    if (tensor.offset + tensor.size() > values.size()) {
      throw CheckpointError("snapshot of " + std::string(buffer.file) + " is shorter than tensor " +
                            tensor.name);
    }
    TensorShard shard;
    shard.name = tensor.name;
    shard.role = buffer.role;
    shard.shape = tensor.shape;
    shard.slice_offset = 0;
    shard.slice_count = tensor.size();
    shard.file = buffer.file;
    shard.byte_offset = tensor.offset * sizeof(float);
    shard.xxhash64 = shard_checksum(shard, values.data() + tensor.offset, tensor.size() * sizeof(float));
    manifest.tensors.push_back(std::move(shard));
  }
  io::OutputFile file(path);
  if (fail_midway) {
    file.write(values.data(), bytes / 2);
    throw CheckpointError("cannot write " + path.string() +
                          ": injected fault fail_checkpoint_write after " +
                          std::to_string(bytes / 2) + " of " + std::to_string(bytes) + " bytes");
  }
  file.write(values.data(), bytes);
  file.sync_and_close();
  manifest.files.push_back({buffer.file, bytes});
  if (hold) hold_for_tests(snapshot.step);
}

}  // namespace

WriteResult write_checkpoint(const Snapshot& snapshot, const WriteOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_ms();
  const std::string name = directory_name(snapshot.step);
  const fs::path final_dir = options.root / name;
  const fs::path temp_dir =
      options.root / ("." + name + ".tmp-" + std::to_string(static_cast<long long>(::getpid())));
  const uint64_t needed =
      (snapshot.params.size() + snapshot.adam_m.size() + snapshot.adam_v.size()) * sizeof(float);
  std::error_code error;
  fs::create_directories(options.root, error);
  if (error) throw CheckpointError("cannot create " + options.root.string() + ": " + error.message());
  fs::remove_all(temp_dir, error);
  if (!fs::create_directory(temp_dir, error) || error) {
    throw CheckpointError(explain_full_disk("cannot create " + temp_dir.string() + ": " +
                                                (error ? error.message() : std::string("exists")),
                                            options.root, needed));
  }
  try {
    Manifest manifest;
    manifest.step = snapshot.step;
    manifest.optimizer_steps = snapshot.optimizer_steps;
    manifest.config_toml = snapshot.config_toml;
    manifest.seed = snapshot.seed;
    manifest.world_size = std::max<uint32_t>(snapshot.world_size, 1);
    manifest.data_parallel =
        snapshot.data_parallel > 0 ? snapshot.data_parallel : manifest.world_size;
    manifest.pipeline_parallel = std::max<uint32_t>(snapshot.pipeline_parallel, 1);
    manifest.tensor_parallel = std::max<uint32_t>(snapshot.tensor_parallel, 1);
    manifest.zero_stage = snapshot.zero_stage;
    manifest.next_step = snapshot.step;
    manifest.precision = snapshot.precision;
    manifest.created_unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const DataBuffer buffers[] = {{"params.bin", Role::param, &snapshot.params},
                                  {"adam_m.bin", Role::adam_m, &snapshot.adam_m},
                                  {"adam_v.bin", Role::adam_v, &snapshot.adam_v}};
    for (const auto& buffer : buffers) {
      const bool first = buffer.role == Role::param;
      write_buffer(temp_dir, buffer, snapshot, options.fail_midway && first, first, manifest);
    }
    write_manifest(temp_dir / kManifestFile, manifest);
    io::OutputFile(temp_dir / kCommittedFile).sync_and_close();
    io::sync_directory(temp_dir);
    // A checkpoint of this step already there (a resumed run that repeats a step) is
    // replaced: uncommit it first, then swap the new one in.
    if (fs::exists(final_dir, error)) {
      fs::remove(final_dir / kCommittedFile, error);
      fs::remove_all(final_dir, error);
    }
    io::rename_path(temp_dir, final_dir);
    io::sync_directory(options.root);
  } catch (const CheckpointError& failure) {
    fs::remove_all(temp_dir, error);
    throw CheckpointError(explain_full_disk(failure.what(), options.root, needed));
  } catch (...) {
    fs::remove_all(temp_dir, error);
    throw;
  }
  prune(options.root, options.keep_last);
  WriteResult result;
  result.path = final_dir;
  result.bytes = directory_bytes(final_dir);
  result.cpu_ms = thread_cpu_ms() - cpu_start;
  result.write_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dseek::checkpoint
