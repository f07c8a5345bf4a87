// What a run leaves to go on from, said at its end by dseek-node and `dseek launch`:
//   checkpoints: /abs/runs/single/checkpoints (newest: step 300)
//   resume with: build/bin/dseek launch --nodes 2 config/single.toml --resume latest
// and the command line helpers to write that command so that it can be pasted.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::cli {

// The two lines above, or "" when the run left no committed checkpoint. `command` is
// the program and its arguments without any --resume (see without_resume()). A secret
// on the command line (--set cluster.secret=...) is never echoed: the hint leaves it out
// and says to give it again (issue 28: the hint printed it, and logs keep stderr).
std::string resume_hint(const config::JobConfig& config, const std::filesystem::path& run_dir,
                        const std::vector<std::string>& command);

// `args` without "--resume X" / "--resume=X".
std::vector<std::string> without_resume(const std::vector<std::string>& args);

// `args` without "--set cluster.secret=..." (or "--set=cluster.secret=..."); `dropped`
// tells whether there was one.
std::vector<std::string> without_secret(const std::vector<std::string>& args, bool& dropped);

// The key of a --set value "section.key=value", without surrounding blanks.
std::string assignment_key(const std::string& assignment);

// One word for a POSIX shell: as it is when it is safe, else in single quotes.
std::string shell_quote(const std::string& word);

}  // namespace dseek::cli
