// Typo suggestions: the edit distance between two words and the closest of a list, for
// the "did you mean" of a config key (runtime/config/load.cpp) and of a command or
// option on the command line (apps/cli/usage.hpp). One implementation for both.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::util {

// Levenshtein distance: insertions, deletions and substitutions of one character.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` within `max_distance` edits (the first of equals), or
// nothing: farther than two edits is a different word, not a typo.
std::optional<std::string> closest_word(std::string_view word,
                                        const std::vector<std::string>& candidates,
                                        size_t max_distance = 2);

}  // namespace dseek::util
