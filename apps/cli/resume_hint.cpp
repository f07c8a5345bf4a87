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

std::string assignment_key(const std::string& assignment) {
  std::string key = assignment.substr(0, assignment.find('='));
  const auto first = key.find_first_not_of(" \t");
  const auto last = key.find_last_not_of(" \t");
  return first == std::string::npos ? "" : key.substr(first, last - first + 1);
}

std::vector<std::string> without_secret(const std::vector<std::string>& args, bool& dropped) {
  std::vector<std::string> kept;
  dropped = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set" && i + 1 < args.size() &&
        assignment_key(args[i + 1]) == "cluster.secret") {
      dropped = true;
      ++i;
      continue;
    }
    if (args[i].rfind("--set=", 0) == 0 && assignment_key(args[i].substr(6)) == "cluster.secret") {
      dropped = true;
      continue;
    }
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
  bool secret_left_out = false;
  std::string words;
  for (const auto& word : without_secret(command, secret_left_out)) words += shell_quote(word) + " ";
  return "checkpoints: " + root.string() + " (newest: step " +
         std::to_string(committed.back().step) + ")\nresume with: " + words + "--resume latest\n" +
         (secret_left_out ? "(the cluster secret given with --set is left out of this line: "
                            "give it again, or set DSEEK_CLUSTER_SECRET)\n"
                          : "");
}

}  // namespace dseek::cli
