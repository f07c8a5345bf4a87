// split_owned(), how the gradient_shard actors divide a replica's owned ranges: the
// pieces cover the owned elements exactly once and in order, cut at multiples of the
// alignment, with element counts that differ by at most one alignment unit (+ rounding).
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "runtime/train/optimizer_shards.hpp"

using dseek::model::ParamRange;
using dseek::train::split_owned;

namespace {

std::vector<size_t> covered(const std::vector<std::vector<ParamRange>>& pieces) {
  std::vector<size_t> elements;
  for (const auto& piece : pieces)
    for (const auto& range : piece)
      for (size_t i = range.offset; i < range.end(); ++i) elements.push_back(i);
  return elements;
}

std::vector<size_t> covered(const std::vector<ParamRange>& owned) {
  return covered(std::vector<std::vector<ParamRange>>{owned});
}

size_t count_of(const std::vector<ParamRange>& piece) {
  size_t n = 0;
  for (const auto& range : piece) n += range.count;
  return n;
}

}  // namespace

TEST_CASE("split_owned cuts the owned ranges into aligned, balanced pieces", "[optim][zero]") {
  const std::vector<ParamRange> whole{{0, 100003}};
  const std::vector<ParamRange> shard{{1000, 5000}, {20000, 777}, {30000, 40001}};
  for (const auto& owned : {whole, shard}) {
    for (int pieces : {1, 2, 3, 7}) {
      INFO(pieces << " pieces of " << owned.size() << " ranges");
      const auto split = split_owned(owned, pieces, 16);
      REQUIRE(split.size() == static_cast<size_t>(pieces));
      CHECK(covered(split) == covered(owned));  // every element once, in order
      size_t smallest = SIZE_MAX, largest = 0, before = 0;
      for (size_t p = 0; p < split.size(); ++p) {
        const size_t n = count_of(split[p]);
        smallest = std::min(smallest, n);
        largest = std::max(largest, n);
        // Each piece but the first starts at a multiple of 16 owned elements.
        if (p > 0) CHECK(before % 16 == 0);
        before += n;
      }
      CHECK(largest - smallest <= 32);
    }
  }
  // Fewer elements than pieces x alignment: fewer pieces, none empty.
  const auto tiny = split_owned({{5, 40}}, 8, 16);
  CHECK(tiny.size() == 2);
  CHECK(covered(tiny) == covered(std::vector<ParamRange>{{5, 40}}));
}
