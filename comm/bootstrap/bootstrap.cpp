// Length-prefixed packing of several strings into one bootstrap contribution.
#include "comm/bootstrap/bootstrap.hpp"

#include <cstdint>
#include <cstring>

#include "comm/types.hpp"

namespace dseek::comm {

std::string pack_strings(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    const uint64_t n = p.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += p;
  }
  return out;
}

std::vector<std::string> unpack_strings(const std::string& packed) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos < packed.size()) {
    uint64_t n = 0;
    if (packed.size() - pos < sizeof n) throw CommError(ErrorKind::invalid_argument, "truncated bootstrap record");
    std::memcpy(&n, packed.data() + pos, sizeof n);
    pos += sizeof n;
    if (packed.size() - pos < n) throw CommError(ErrorKind::invalid_argument, "truncated bootstrap record");
    parts.push_back(packed.substr(pos, n));
    pos += n;
  }
  return parts;
}

}  // namespace dseek::comm
