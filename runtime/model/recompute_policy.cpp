// Implementation of recompute_policy.hpp.
#include "runtime/model/recompute_policy.hpp"

#include <charconv>

namespace dseek::model {

std::string RecomputePolicy::text() const {
  if (every <= 0) return "none";
  return "every:" + std::to_string(every);
}

std::optional<RecomputePolicy> parse_recompute_policy(std::string_view text) {
  if (text == "none") return RecomputePolicy{};
  constexpr std::string_view prefix = "every:";
  if (text.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = text.substr(prefix.size());
  // from_chars accepts no sign or space, but would stop at the first non-digit: the
  // whole rest must be consumed.
  int64_t every = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), every);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || every < 1)
    return std::nullopt;
  return RecomputePolicy{every};
}

}  // namespace dseek::model
