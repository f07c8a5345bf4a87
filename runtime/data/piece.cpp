// Names of the drop reasons and the size of a piece (see piece.hpp).
#include "runtime/data/piece.hpp"

namespace dseek::data {

const char* drop_reason_name(DropReason reason) {
  static constexpr std::array<const char*, kDropReasons> names = {
      "kept",          "empty",        "too_short",       "too_long",       "symbol_ratio",
      "digit_ratio",   "repeated_lines", "exact_duplicate", "near_duplicate", "beyond_max_bytes"};
  return names[static_cast<size_t>(reason)];
}

uint64_t Piece::bytes() const {
  uint64_t total = sizeof(Piece);
  for (const PieceDocument& document : documents) {
    total += sizeof(PieceDocument) + document.text.capacity() +
             4 * (document.signature.capacity() + document.tokens.capacity());
  }
  for (const std::string& problem : problems) total += problem.capacity();
  return total;
}

}  // namespace dseek::data
