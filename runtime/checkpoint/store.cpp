// Implementation of store.hpp.
#include "runtime/checkpoint/store.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "runtime/checkpoint/manifest.hpp"

namespace dseek::checkpoint {

namespace fs = std::filesystem;

std::string directory_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

fs::path checkpoint_root(const config::JobConfig& config, const fs::path& run_dir) {
  if (!config.checkpoint.dir.empty()) return config.checkpoint.dir;
  return run_dir / "checkpoints";
}

namespace {
bool parse_step(const std::string& name, int64_t& step) {
  if (name.size() < 6 || name.rfind("step-", 0) != 0) return false;
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size();
  auto [end, error] = std::from_chars(first, last, step);
  return error == std::errc() && end == last && step >= 0;
}
}  // namespace

std::vector<StoredCheckpoint> list_committed(const fs::path& root) {
  std::vector<StoredCheckpoint> found;
  std::error_code error;
  if (!fs::is_directory(root, error)) return found;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    int64_t step = 0;
    if (!entry.is_directory(error) || !parse_step(entry.path().filename().string(), step)) continue;
    if (!fs::exists(entry.path() / kCommittedFile, error)) continue;
    found.push_back({step, entry.path()});
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

std::vector<fs::path> prune(const fs::path& root, int64_t keep_last) {
  std::vector<fs::path> removed;
  auto committed = list_committed(root);
  std::error_code error;
  const size_t keep = static_cast<size_t>(std::max<int64_t>(keep_last, 1));
  for (size_t i = 0; i + keep < committed.size(); ++i) {
    // Drop the marker first: a crash in the middle leaves an uncommitted (invisible)
    // directory, never a committed one with missing files.
    fs::remove(committed[i].path / kCommittedFile, error);
    fs::remove_all(committed[i].path, error);
    removed.push_back(committed[i].path);
  }
  // Temporary directories of writes that failed or were killed.
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const auto name = entry.path().filename().string();
    if (name.rfind(".step-", 0) == 0 && name.find(".tmp") != std::string::npos) {
      fs::remove_all(entry.path(), error);
      removed.push_back(entry.path());
    }
  }
  return removed;
}

uint64_t directory_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error)) total += entry.file_size(error);
  }
  return total;
}

}  // namespace dseek::checkpoint
