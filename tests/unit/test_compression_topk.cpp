// Gradient compression: the top-k and top-k + int8 codecs (comm/compression).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "comm/compression/codec.hpp"
#include "comm/compression/topk_codec.hpp"
#include "comm/compression/topk_int8_codec.hpp"

namespace cc = dseek::comm::compression;

namespace {

std::vector<float> random_gradient(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

std::vector<std::byte> encode(cc::Codec& codec, const std::vector<float>& g) {
  std::vector<std::byte> msg(codec.max_encoded_bytes(g.size()));
  REQUIRE(codec.encode(g.data(), g.size(), msg.data()) == msg.size());
  return msg;
}

std::vector<float> decode(const cc::Codec& codec, const std::vector<std::byte>& msg, size_t n) {
  std::vector<float> out(n, 0.0f);
  codec.decode_add(msg.data(), msg.size(), out.data(), n);
  return out;
}

// The top-k contract, checked exactly (no tolerance: kept values are copied bit for bit):
// exactly k distinct positions are sent in ascending order, they decode to g[i] exactly,
// every other position decodes to 0, and every kept |g| is >= every dropped |g| (the k
// largest in magnitude).
void check_topk(const std::vector<float>& g, double fraction) {
  const size_t n = g.size();
  const size_t k = cc::topk_count(n, fraction);
  cc::TopK codec(fraction);
  const auto msg = encode(codec, g);
  REQUIRE(msg.size() == cc::kHeaderBytes + 8 * k);
  std::vector<uint32_t> idx(k);
  if (k > 0) std::memcpy(idx.data(), msg.data() + cc::kHeaderBytes, 4 * k);
  REQUIRE(std::is_sorted(idx.begin(), idx.end()));
  REQUIRE(std::adjacent_find(idx.begin(), idx.end()) == idx.end());
  std::vector<char> kept(n, 0);
  for (uint32_t i : idx) kept[i] = 1;
  const auto dec = decode(codec, msg, n);
  float min_kept = std::numeric_limits<float>::infinity();
  float max_dropped = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i]) {
      REQUIRE(dec[i] == g[i]);
      min_kept = std::min(min_kept, std::fabs(g[i]));
    } else {
      REQUIRE(dec[i] == 0.0f);
      max_dropped = std::max(max_dropped, std::fabs(g[i]));
    }
  }
  REQUIRE(min_kept >= max_dropped);
}

}  // namespace

TEST_CASE("top-k count is max(1, ceil(fraction * n))", "[compression][topk]") {
  CHECK(cc::topk_count(0, 0.05) == 0);
  CHECK(cc::topk_count(1, 0.05) == 1);
  CHECK(cc::topk_count(3, 0.05) == 1);
  CHECK(cc::topk_count(100, 0.05) == 5);  // 0.05 * 100 is 5.000000000000001 in binary
  CHECK(cc::topk_count(101, 0.05) == 6);
  CHECK(cc::topk_count(1'000'000, 0.05) == 50'000);
  CHECK(cc::topk_count(7, 1.0) == 7);
}

TEST_CASE("top-k keeps the k largest magnitudes exactly and zeroes the rest", "[compression][topk]") {
  for (size_t n : {0u, 1u, 3u, 17u, 1000u, 65'535u, 65'536u, 300'007u}) {
    for (double fraction : {0.001, 0.05, 0.3, 1.0}) {
      INFO("n=" << n << " fraction=" << fraction);
      check_topk(random_gradient(n, static_cast<uint32_t>(n + 1)), fraction);
    }
  }
}

TEST_CASE("top-k on distributions that defeat the sampled threshold", "[compression][topk]") {
  const size_t n = 1 << 20;
  SECTION("all equal: ties keep the lowest indices") {
    std::vector<float> g(n, -0.25f);
    check_topk(g, 0.05);
    cc::TopK codec(0.05);
    const auto msg = encode(codec, g);
    uint32_t last;
    std::memcpy(&last, msg.data() + cc::kHeaderBytes + 4 * (cc::topk_count(n, 0.05) - 1), 4);
    CHECK(last == cc::topk_count(n, 0.05) - 1);
  }
  SECTION("large values only on a regular stride") {
    auto g = random_gradient(n, 11);
    for (size_t i = 0; i < n; i += 64) g[i] = 1000.0f + static_cast<float>(i % 7);
    check_topk(g, 0.05);
  }
  SECTION("mostly zeros") {
    std::vector<float> g(n, 0.0f);
    for (size_t i = 0; i < n; i += 1000) g[i] = static_cast<float>(i);
    check_topk(g, 0.01);
  }
  SECTION("sorted ramp") {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i) * 1e-3f;
    check_topk(g, 0.05);
  }
}

TEST_CASE("top-k sends NaN and inf rather than dropping them", "[compression][topk]") {
  auto g = random_gradient(1000, 2);
  g[500] = std::numeric_limits<float>::quiet_NaN();
  g[7] = -std::numeric_limits<float>::infinity();
  cc::TopK codec(0.01);
  const auto dec = decode(codec, encode(codec, g), g.size());
  CHECK(std::isnan(dec[500]));
  CHECK(dec[7] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("top-k + int8 keeps the top k within half a scale step", "[compression][topk]") {
  for (size_t n : {1u, 3u, 1000u, 5119u, 200'000u}) {
    for (size_t block : {1u, 5u, 256u}) {
      INFO("n=" << n << " block=" << block);
      const auto g = random_gradient(n, static_cast<uint32_t>(n * 3 + block));
      const double fraction = 0.05;
      const size_t k = cc::topk_count(n, fraction);
      cc::TopKInt8 codec(fraction, block);
      const auto msg = encode(codec, g);
      REQUIRE(msg.size() == cc::kHeaderBytes + 5 * k + 4 * ((k + block - 1) / block));
      std::vector<uint32_t> idx(k);
      std::memcpy(idx.data(), msg.data() + cc::kHeaderBytes, 4 * k);
      // The same positions as plain top-k.
      cc::TopK plain(fraction);
      const auto plain_msg = encode(plain, g);
      REQUIRE(std::memcmp(plain_msg.data() + cc::kHeaderBytes, idx.data(), 4 * k) == 0);
      const auto dec = decode(codec, msg, n);
      std::vector<char> kept(n, 0);
      for (uint32_t i : idx) kept[i] = 1;
      // Combined bound: a kept element is within scale_b / 2 of g, scale_b = max|g| over
      // the selected values of its block / 127 (tolerance 0.5001 scale_b for float
      // rounding, as for int8); a dropped one decodes to 0.
      for (size_t b0 = 0; b0 < k; b0 += block) {
        const size_t end = std::min(k, b0 + block);
        float amax = 0.0f;
        for (size_t j = b0; j < end; ++j) amax = std::max(amax, std::fabs(g[idx[j]]));
        const float scale = amax / 127.0f;
        for (size_t j = b0; j < end; ++j) REQUIRE(std::fabs(dec[idx[j]] - g[idx[j]]) <= 0.5001f * scale);
      }
      for (size_t i = 0; i < n; ++i) {
        if (!kept[i]) REQUIRE(dec[i] == 0.0f);
      }
    }
  }
}

TEST_CASE("top-k 5% + int8 on 1M floats saves at least 90% of the bytes", "[compression][topk]") {
  const auto g = random_gradient(1 << 20, 4);
  auto codec = cc::make_codec("topk+int8", 0.05);
  encode(*codec, g);
  const auto sent = codec->sent();
  CHECK(sent.raw_bytes == 4u << 20);
  CHECK(sent.messages == 1);
  // 52429 kept: 5 bytes each + 205 scales + header = 262,997 bytes, 6.3% of 4 MiB.
  CHECK(sent.encoded_bytes == 32 + 5 * 52'429 + 4 * 205);
  CHECK(sent.saved_fraction() >= 0.90);
  CHECK(sent.compression_ratio() >= 10.0);
  // Plain top-k 5% (8 bytes per kept value) saves 90% too, int8 alone 75%.
  auto topk = cc::make_codec("topk", 0.05);
  encode(*topk, g);
  CHECK(topk->sent().saved_fraction() >= 0.89);
  auto int8 = cc::make_codec("int8");
  encode(*int8, g);
  CHECK(int8->sent().saved_fraction() == Approx(0.75 - 1.0 / 256).margin(1e-4));
}

TEST_CASE("malformed top-k messages throw and name the problem", "[compression][topk]") {
  using Catch::Matchers::Contains;
  const auto g = random_gradient(1000, 8);
  for (const char* name : {"topk", "topk+int8"}) {
    INFO(name);
    auto codec = cc::make_codec(name, 0.05);
    const auto msg = encode(*codec, g);
    std::vector<float> acc(g.size(), 0.0f);
    auto decode_bytes = [&](const std::vector<std::byte>& bytes, size_t n = 1000) {
      codec->decode_add(bytes.data(), bytes.size(), acc.data(), n);
    };
    auto set_index = [&](std::vector<std::byte> bytes, size_t position, uint32_t value) {
      std::memcpy(bytes.data() + cc::kHeaderBytes + 4 * position, &value, 4);
      return bytes;
    };
    CHECK_THROWS_WITH(decode_bytes(set_index(msg, 10, 1000)),
                      Contains("index 1000 at position 10 is out of range for n=1000"));
    CHECK_THROWS_WITH(decode_bytes(set_index(msg, 49, 4'000'000'000u)), Contains("out of range"));
    uint32_t first;
    std::memcpy(&first, msg.data() + cc::kHeaderBytes, 4);
    CHECK_THROWS_WITH(decode_bytes(set_index(msg, 1, first)), Contains("not strictly ascending at position 1"));
    auto truncated = msg;
    truncated.resize(msg.size() - 4);
    CHECK_THROWS_WITH(decode_bytes(truncated), Contains(name) && Contains("truncated"));
    auto big_k = msg;
    const uint64_t k = 2000;
    std::memcpy(big_k.data() + 24, &k, 8);
    CHECK_THROWS_WITH(decode_bytes(big_k), Contains("k=2000 exceeds n=1000"));
    CHECK_THROWS_WITH(decode_bytes(msg, 1001), Contains("element count mismatch"));
    CHECK_THROWS_WITH(decode_bytes(encode(*cc::make_codec("none"), g)), Contains("codec mismatch"));
    for (float v : acc) REQUIRE(v == 0.0f);  // failed decodes leave the accumulator alone
  }
}
