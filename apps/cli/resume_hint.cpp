// Implementation of resume_hint.hpp.
#include "cli/resume_hint.hpp"

#include "runtime/checkpoint/store.hpp"

namespace dseek::cli {

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+-@%") ==
      std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> without_resume(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume") {
      ++i;
      continue;
    }
    if (args[i].rfind("--resume=", 0) == 0) continue;
    kept.push_back(args[i]);
  }
  return kept;
}

std::string resume_hint(const config::JobConfig& config, const std::filesystem::path& run_dir,
                        const std::vector<std::string>& command) {
  std::error_code error;
  std::filesystem::path root = checkpoint::checkpoint_root(config, run_dir);
  const auto full = std::filesystem::absolute(root, error);
  if (!error) root = full.lexically_normal();
  const auto committed = checkpoint::list_committed(root);
  if (committed.empty()) return "";
  std::string words;
  for (const auto& word : command) words += shell_quote(word) + " ";
  return "checkpoints: " + root.string() + " (newest: step " +
         std::to_string(committed.back().step) + ")\nresume with: " + words + "--resume latest\n";
}

}  // namespace dseek::cli
