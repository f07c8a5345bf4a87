// `--version` of dseek and dseek-node: the version, the git commit the build was made
// from ("-dirty" with uncommitted changes) and whether it has the CUDA backend, e.g.
//   dseek 0.1.0 (commit 1a2b3c4d5e6f, CUDA on)
#pragma once

#include <string>
#include <string_view>

namespace dseek::cli {

std::string version_text(std::string_view program);

}  // namespace dseek::cli
