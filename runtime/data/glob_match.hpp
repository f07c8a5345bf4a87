// Shell-style globs on relative paths for `dseek data prepare --include/--exclude`:
// `*` matches within one path component, `**` across components, `?` one character
// other than '/', `[abc]`, `[a-z]`, `[!a]` a set. A glob without '/' is matched against
// the file's name alone (as in .gitignore), otherwise against the whole relative path.
#pragma once

#include <string_view>

namespace dseek::data {

bool glob_match(std::string_view glob, std::string_view relative_path);

}  // namespace dseek::data
