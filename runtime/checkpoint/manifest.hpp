// The checkpoint manifest as plain C++ (schemas/checkpoint_manifest.capnp holds the
// on-disk form) and its file names. Only manifest.cpp sees Cap'n Proto.
//
// A checkpoint is a directory step-<8 digits>/ holding:
//   params.bin, adam_m.bin, adam_v.bin   raw little-endian fp32, mmap-able
//   manifest.capnp                       what the bytes are (this struct)
//   COMMITTED                            written last; without it the directory does
//                                        not exist for a reader
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/checkpoint/precision_state.hpp"

namespace dseek::checkpoint {

// Format 2 binds each shard's checksum to its tensor's name, role, dtype, shape and slice
// (shard_checksum) and gives the manifest a checksum of its own (manifest_checksum), so a
// swapped or renamed tensor entry is caught. Format 1 (written before 2026-12-02: the
// checksums cover the bytes alone) is still read; `dseek ckpt verify` says what it
// cannot catch in one.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr const char* kManifestFile = "manifest.capnp";
inline constexpr const char* kCommittedFile = "COMMITTED";

enum class Role { param, adam_m, adam_v };
const char* role_name(Role role);

struct TensorShard {
  std::string name;
  Role role = Role::param;
  std::vector<int64_t> shape;  // of the full tensor
  uint64_t slice_offset = 0;   // elements into the full tensor
  uint64_t slice_count = 0;
  std::string file;
  uint64_t byte_offset = 0;
  uint64_t xxhash64 = 0;  // shard_checksum of the slice's bytes
  uint64_t full_count() const;
};

struct DataFile {
  std::string name;
  uint64_t bytes = 0;
};

struct Manifest {
  uint32_t format_version = kFormatVersion;
  int64_t step = 0;             // optimizer steps completed = the next step to run
  int64_t optimizer_steps = 0;  // AdamW's counter (bias correction)
  uint32_t world_size = 1, data_parallel = 1, tensor_parallel = 1, pipeline_parallel = 1,
           zero_stage = 0;
  std::string config_toml;
  int64_t seed = 0;       // data position: the order is f(seed, step)
  int64_t next_step = 0;
  PrecisionState precision;  // loss scale, fp8 amax histories (precision_state.hpp)
  double created_unix_s = 0;
  std::vector<TensorShard> tensors;
  std::vector<DataFile> files;
  uint64_t checksum = 0;  // manifest_checksum, as read (format 2; 0 in format 1)
};

// The checksum of a shard's `size` bytes: XXH64 seeded with a hash of the shard's
// identity (name, role, dtype, full shape, slice offset and count), so bytes listed under
// another tensor's entry no longer match. Format 1: XXH64 of the bytes with seed 0.
uint64_t shard_checksum(const TensorShard& identity, const void* bytes, size_t size,
                        uint32_t format_version = kFormatVersion);
// The checksum of everything the manifest says: every field, shard entry and data file
// (not `checksum` itself).
uint64_t manifest_checksum(const Manifest& manifest);

// Writes `manifest` to `path` (no fsync; the caller syncs). Throws CheckpointError.
void write_manifest(const std::filesystem::path& path, const Manifest& manifest);
// Reads and checks the manifest of checkpoint directory `dir`: missing, garbled,
// inconsistent (a shard outside its file or tensor) or changed after it was written (its
// checksum) is a CheckpointError naming it.
Manifest read_manifest(const std::filesystem::path& dir);

}  // namespace dseek::checkpoint
