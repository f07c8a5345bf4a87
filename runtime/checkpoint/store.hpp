// Where checkpoints live and which of them exist: RUN_DIR/checkpoints/step-<8 digits>/
// (or checkpoint.dir). A directory counts only when its COMMITTED marker is there;
// half-written ones (".step-...tmp" names, or no marker) are invisible to readers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::checkpoint {

struct StoredCheckpoint {
  int64_t step = 0;
  std::filesystem::path path;
};

// "step-00000020"
std::string directory_name(int64_t step);
// checkpoint.dir, or run_dir/checkpoints when it is empty.
std::filesystem::path checkpoint_root(const config::JobConfig& config,
                                      const std::filesystem::path& run_dir);
// The committed checkpoints under `root`, oldest first; none when root does not exist.
std::vector<StoredCheckpoint> list_committed(const std::filesystem::path& root);
// Deletes all but the newest `keep_last` committed checkpoints (and leftover temporary
// directories of failed writes). Returns the paths removed.
std::vector<std::filesystem::path> prune(const std::filesystem::path& root, int64_t keep_last);
// Total size of the regular files in a directory.
uint64_t directory_bytes(const std::filesystem::path& dir);

}  // namespace dseek::checkpoint
