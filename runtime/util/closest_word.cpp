// Implementation of closest_word.hpp.
#include "runtime/util/closest_word.hpp"

#include <algorithm>

namespace dseek::util {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_word(std::string_view word,
                                        const std::vector<std::string>& candidates,
                                        size_t max_distance) {
  std::optional<std::string> best;
  size_t best_distance = max_distance + 1;
  for (const auto& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace dseek::util
