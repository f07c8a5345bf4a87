// Implementation of slurm_hostlist.hpp.
#include "runtime/cluster_env/slurm_hostlist.hpp"

#include <cstdint>

namespace dseek::cluster_env {

namespace {

[[noreturn]] void fail(std::string_view entry, const std::string& why) {
  throw HostlistError("'" + std::string(entry) + "': " + why);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }

uint64_t to_number(std::string_view entry, std::string_view digits) {
  if (digits.empty() || digits.size() > 9) fail(entry, "bad number '" + std::string(digits) + "'");
  uint64_t value = 0;
  for (char c : digits) {
    if (!is_digit(c)) fail(entry, "bad number '" + std::string(digits) + "'");
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::string padded(uint64_t value, size_t width) {
  std::string text = std::to_string(value);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

// The values of one bracket group's inside ("01-04,07").
std::vector<std::string> expand_group(std::string_view entry, std::string_view inside) {
  std::vector<std::string> values;
  if (inside.empty()) fail(entry, "empty brackets");
  size_t start = 0;
  while (true) {
    const size_t comma = inside.find(',', start);
    const std::string_view range =
        inside.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                              : comma - start);
    if (range.empty()) fail(entry, "an empty range in [" + std::string(inside) + "]");
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text =
        dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    const uint64_t lo = to_number(entry, lo_text), hi = to_number(entry, hi_text);
    if (lo > hi) fail(entry, "range " + std::string(range) + " runs backwards");
    if (hi - lo >= kMaxHosts) fail(entry, "more than " + std::to_string(kMaxHosts) + " hosts");
    for (uint64_t value = lo; value <= hi; ++value) values.push_back(padded(value, lo_text.size()));
    if (values.size() > kMaxHosts) fail(entry, "more than " + std::to_string(kMaxHosts) + " hosts");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return values;
}

// One entry ("rack[1-2]-node[01-02]") appended to `hosts`.
void expand_entry(std::string_view entry, std::vector<std::string>& hosts) {
  std::vector<std::string> names{""};
  size_t at = 0;
  bool after_group = false;
  while (at < entry.size()) {
    const size_t open = entry.find('[', at);
    const std::string_view text = entry.substr(at, open == std::string_view::npos
                                                       ? std::string_view::npos
                                                       : open - at);
    if (text.find(']') != std::string_view::npos) fail(entry, "']' without '['");
    if (open == std::string_view::npos) {
      if (after_group) fail(entry, "text after the last ']' (Slurm refuses it too)");
      for (auto& name : names) name += text;
      break;
    }
    const size_t close = entry.find(']', open);
    if (close == std::string_view::npos) fail(entry, "'[' without ']'");
    const std::string_view inside = entry.substr(open + 1, close - open - 1);
    if (inside.find('[') != std::string_view::npos) fail(entry, "nested '['");
    const auto values = expand_group(entry, inside);
    if (names.size() * values.size() > kMaxHosts)
      fail(entry, "more than " + std::to_string(kMaxHosts) + " hosts");
    std::vector<std::string> product;
    product.reserve(names.size() * values.size());
    for (const auto& name : names)
      for (const auto& value : values) product.push_back(name + std::string(text) + value);
    names = std::move(product);
    after_group = true;
    at = close + 1;
  }
  if (names.size() == 1 && names[0].empty()) fail(entry, "no host name");
  if (hosts.size() + names.size() > kMaxHosts)
    throw HostlistError("more than " + std::to_string(kMaxHosts) + " hosts");
  hosts.insert(hosts.end(), names.begin(), names.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
  std::vector<std::string> hosts;
  size_t at = 0;
  while (at < list.size()) {
    if (is_separator(list[at])) {
      ++at;
      continue;
    }
    // An entry ends at a separator outside brackets.
    size_t end = at;
    int depth = 0;
    for (; end < list.size(); ++end) {
      if (list[end] == '[') ++depth;
      else if (list[end] == ']') --depth;
      else if (depth <= 0 && is_separator(list[end])) break;
    }
    expand_entry(list.substr(at, end - at), hosts);
    at = end;
  }
  if (hosts.empty()) throw HostlistError("no host in '" + std::string(list) + "'");
  return hosts;
}

}  // namespace dseek::cluster_env
