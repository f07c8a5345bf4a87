// Glob matching (see glob_match.hpp) by recursion on the pattern; paths are short.
#include "runtime/data/glob_match.hpp"

namespace dseek::data {
namespace {

// Matches a bracket set at glob[g] == '['; sets `end` past the ']' and returns whether
// `c` is in it. A '[' without a closing ']' is a literal.
bool in_set(std::string_view glob, size_t g, char c, size_t& end, bool& valid) {
  size_t i = g + 1;
  bool negate = i < glob.size() && (glob[i] == '!' || glob[i] == '^');
  if (negate) ++i;
  bool found = false;
  bool first = true;
  for (; i < glob.size() && (first || glob[i] != ']'); first = false) {
    char lo = glob[i], hi = lo;
    if (i + 2 < glob.size() && glob[i + 1] == '-' && glob[i + 2] != ']') {
      hi = glob[i + 2];
      i += 3;
    } else {
      ++i;
    }
    if (c >= lo && c <= hi) found = true;
  }
  valid = i < glob.size();
  end = i + 1;
  return found != negate;
}

bool match_from(std::string_view glob, size_t g, std::string_view path, size_t p) {
  while (g < glob.size()) {
    const char c = glob[g];
    if (c == '*') {
      const bool any_depth = g + 1 < glob.size() && glob[g + 1] == '*';
      size_t rest = g + (any_depth ? 2 : 1);
      // "**/" also matches no folder at all.
      if (any_depth && rest < glob.size() && glob[rest] == '/' &&
          match_from(glob, rest + 1, path, p)) {
        return true;
      }
      for (size_t q = p;; ++q) {
        if (match_from(glob, rest, path, q)) return true;
        if (q == path.size() || (!any_depth && path[q] == '/')) return false;
      }
    }
    if (p == path.size()) return false;
    if (c == '?') {
      if (path[p] == '/') return false;
    } else if (c == '[') {
      size_t end = 0;
      bool valid = false;
      const bool found = in_set(glob, g, path[p], end, valid);
      if (valid) {
        if (!found || path[p] == '/') return false;
        g = end;
        ++p;
        continue;
      }
      if (path[p] != '[') return false;
    } else if (c != path[p]) {
      return false;
    }
    ++g;
    ++p;
  }
  return p == path.size();
}

}  // namespace

bool glob_match(std::string_view glob, std::string_view relative_path) {
  if (glob.find('/') == std::string_view::npos) {
    const size_t slash = relative_path.rfind('/');
    if (slash != std::string_view::npos) relative_path.remove_prefix(slash + 1);
  }
  return match_from(glob, 0, relative_path, 0);
}

}  // namespace dseek::data
