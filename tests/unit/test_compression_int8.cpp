// Gradient compression: the INT8 block codec, the "none" codec, the message checks and the
// byte counters shared by every codec (comm/compression).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "comm/compression/codec.hpp"
#include "comm/compression/int8_codec.hpp"

namespace cc = dseek::comm::compression;

namespace {

std::vector<float> random_gradient(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> magnitude(-6.0f, 2.0f);
  std::vector<float> g(n);
  // Magnitudes vary over 8 decades along the buffer, so the blocks have different scales.
  float m = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % 97 == 0) m = std::pow(10.0f, magnitude(rng));
    g[i] = m * normal(rng);
  }
  return g;
}

std::vector<std::byte> encode(cc::Codec& codec, const std::vector<float>& g) {
  std::vector<std::byte> msg(codec.max_encoded_bytes(g.size()));
  const size_t bytes = codec.encode(g.data(), g.size(), msg.data());
  REQUIRE(bytes == msg.size());  // the stated size is exact
  return msg;
}

std::vector<float> decode(const cc::Codec& codec, const std::vector<std::byte>& msg, size_t n) {
  std::vector<float> out(n, 0.0f);
  codec.decode_add(msg.data(), msg.size(), out.data(), n);
  return out;
}

float block_abs_max(const std::vector<float>& g, size_t b0, size_t len) {
  float m = 0.0f;
  for (size_t i = b0; i < b0 + len; ++i) m = std::max(m, std::fabs(g[i]));
  return m;
}

// Checks the int8 round trip of g against the stated bound: per element
// |x - decoded| <= scale / 2, scale = (block max|x|) / 127. Float rounding (the reciprocal
// scale, the product x * 127 / max, the product q * scale) adds at most a few ulps of
// 127 * scale, i.e. < 1e-4 * scale: the tolerance is 0.5001 * scale. Returns the largest
// error in units of scale, so a caller can check that the codec is lossy at all.
double check_int8_round_trip(const std::vector<float>& g, size_t block) {
  cc::Int8Block codec(block);
  const auto msg = encode(codec, g);
  const size_t n = g.size();
  const size_t blocks = (n + block - 1) / block;
  REQUIRE(msg.size() == cc::kHeaderBytes + 4 * blocks + n);
  const auto dec = decode(codec, msg, n);
  double worst = 0.0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t b0 = b * block;
    const size_t len = std::min(block, n - b0);
    const float scale = block_abs_max(g, b0, len) / 127.0f;
    float sent_scale;
    std::memcpy(&sent_scale, msg.data() + cc::kHeaderBytes + 4 * b, 4);
    REQUIRE(sent_scale == scale);  // the message carries exactly max / 127
    for (size_t i = b0; i < b0 + len; ++i) {
      const double err = std::fabs(static_cast<double>(g[i]) - dec[i]);
      INFO("block " << b << " element " << i << " x=" << g[i] << " decoded=" << dec[i] << " scale=" << scale);
      REQUIRE(err <= 0.5001 * scale);
      if (scale > 0) worst = std::max(worst, err / scale);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("int8 round trip is within half a scale step per element", "[compression][int8]") {
  const auto g = random_gradient(100'000, 1);
  const double worst = check_int8_round_trip(g, 256);
  CHECK(worst > 0.4);  // rounding really happened: errors reach close to half a step
}

TEST_CASE("int8 handles odd block remainders and block sizes", "[compression][int8]") {
  for (size_t block : {1u, 7u, 64u, 256u, 1000u}) {
    for (size_t n : {1u, 2u, 3u, 255u, 256u, 257u, 511u, 1000u, 4099u}) {
      INFO("block=" << block << " n=" << n);
      check_int8_round_trip(random_gradient(n, static_cast<uint32_t>(n * 31 + block)), block);
    }
  }
}

TEST_CASE("int8 with empty and tiny inputs", "[compression][int8]") {
  cc::Int8Block codec;
  for (size_t n : {0u, 1u, 3u}) {
    std::vector<float> g = {0.5f, -2.0f, 1e-3f};
    g.resize(n);
    const auto msg = encode(codec, g);
    CHECK(msg.size() == cc::kHeaderBytes + (n > 0 ? 4 + n : 0));
    const auto dec = decode(codec, msg, n);
    for (size_t i = 0; i < n; ++i) CHECK(std::fabs(dec[i] - g[i]) <= 0.5001f * 2.0f / 127.0f);
  }
  // One element is its block's maximum, so it is exact: q = 127, scale = |x| / 127.
  const auto dec1 = decode(codec, encode(codec, {-3.25f}), 1);
  CHECK(dec1[0] == Approx(-3.25f).epsilon(1e-6));
}

TEST_CASE("int8 encodes a zero block as zeros and poisons a non-finite block", "[compression][int8]") {
  cc::Int8Block codec(4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {0, 0, 0, 0, 1, nan, 2, 3, -inf, 1, 1, 1, 4, -4, 2, 0.5f};
  const auto dec = decode(codec, encode(codec, g), g.size());
  for (size_t i = 0; i < 4; ++i) CHECK(dec[i] == 0.0f);
  for (size_t i = 4; i < 12; ++i) CHECK(std::isnan(dec[i]));  // the overflow stays visible
  for (size_t i = 12; i < 16; ++i) CHECK(std::fabs(dec[i] - g[i]) <= 0.5001f * 4.0f / 127.0f);
}

TEST_CASE("decode_add adds into the accumulator and scales by alpha", "[compression][int8]") {
  const auto g = random_gradient(1000, 7);
  for (const char* name : {"none", "int8", "topk", "topk+int8"}) {
    INFO(name);
    auto codec = cc::make_codec(name, 0.1);
    const auto msg = encode(*codec, g);
    const auto once = decode(*codec, msg, g.size());
    std::vector<float> acc(g.size(), 10.0f);
    codec->decode_add(msg.data(), msg.size(), acc.data(), acc.size());
    codec->decode_add(msg.data(), msg.size(), acc.data(), acc.size(), 0.5f);
    for (size_t i = 0; i < g.size(); ++i) {
      // 10 + 1.5 * decoded, up to the rounding of two float additions.
      REQUIRE(acc[i] == Approx(10.0f + 1.5f * once[i]).margin(1e-5));
    }
  }
}

TEST_CASE("the none codec is an exact fp32 copy", "[compression][int8]") {
  const auto g = random_gradient(1001, 3);
  auto codec = cc::make_codec("none");
  const auto msg = encode(*codec, g);
  CHECK(msg.size() == cc::kHeaderBytes + 4 * g.size());
  CHECK(decode(*codec, msg, g.size()) == g);
  CHECK(decode(*codec, encode(*codec, {}), 0).empty());
}

TEST_CASE("malformed int8 messages throw and name the problem", "[compression][int8]") {
  cc::Int8Block codec;
  const auto g = random_gradient(1000, 5);
  const auto msg = encode(codec, g);
  std::vector<float> acc(g.size(), 1.0f);
  const auto untouched = acc;
  auto decode_bytes = [&](std::vector<std::byte> bytes, size_t n = 1000) {
    codec.decode_add(bytes.data(), bytes.size(), acc.data(), n);
  };
  using Catch::Matchers::Contains;

  auto truncated = msg;
  truncated.pop_back();
  CHECK_THROWS_WITH(decode_bytes(truncated), Contains("int8") && Contains("truncated"));
  CHECK_THROWS_WITH(decode_bytes(std::vector<std::byte>(msg.begin(), msg.begin() + 10)),
                    Contains("shorter than the 32-byte header"));
  auto longer = msg;
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH(decode_bytes(longer), Contains("size mismatch"));
  CHECK_THROWS_WITH(decode_bytes(msg, 999), Contains("element count mismatch") && Contains("999"));

  auto bad_magic = msg;
  bad_magic[0] = std::byte{0x00};
  CHECK_THROWS_WITH(decode_bytes(bad_magic), Contains("bad magic"));
  auto bad_version = msg;
  bad_version[4] = std::byte{9};
  CHECK_THROWS_WITH(decode_bytes(bad_version), Contains("version 9"));
  auto bad_id = msg;
  bad_id[5] = std::byte{77};
  CHECK_THROWS_WITH(decode_bytes(bad_id), Contains("unknown codec id 77"));

  auto topk = cc::make_codec("topk");
  const auto topk_msg = encode(*topk, g);
  CHECK_THROWS_WITH(decode_bytes(topk_msg),
                    Contains("codec mismatch") && Contains("'topk'") && Contains("'int8'"));
  CHECK(acc == untouched);  // no failed decode touched the accumulator
}

TEST_CASE("byte counters count raw and encoded bytes per direction", "[compression][int8]") {
  cc::Int8Block codec(256);
  const auto g = random_gradient(1024, 9);
  const auto msg = encode(codec, g);
  encode(codec, g);
  decode(codec, msg, g.size());
  const cc::TrafficCounters sent = codec.sent();
  CHECK(sent.messages == 2);
  CHECK(sent.raw_bytes == 2 * 4096);
  CHECK(sent.encoded_bytes == 2 * (32 + 16 + 1024));
  CHECK(sent.compression_ratio() == Approx(4096.0 / 1072.0));
  CHECK(codec.received() == cc::TrafficCounters{4096, 1072, 1});
  codec.reset_counters();
  CHECK(codec.sent() == cc::TrafficCounters{});
  CHECK(cc::TrafficCounters{}.compression_ratio() == 1.0);
  // A failed decode is not counted as received.
  std::vector<float> acc(5);
  CHECK_THROWS_AS(codec.decode_add(msg.data(), 3, acc.data(), 5), cc::CodecError);
  CHECK(codec.received().messages == 0);
}

TEST_CASE("make_codec knows the four codecs and rejects bad parameters", "[compression][int8]") {
  CHECK(cc::make_codec("none")->id() == cc::CodecId::none);
  CHECK(cc::make_codec("topk")->name() == "topk");
  CHECK(cc::make_codec("int8")->name() == "int8");
  CHECK(cc::make_codec("topk+int8")->name() == "topk+int8");
  CHECK_THROWS_WITH(cc::make_codec("zstd"), Catch::Matchers::Contains("unknown gradient codec 'zstd'"));
  CHECK_THROWS_AS(cc::make_codec("topk", 0.0), std::invalid_argument);
  CHECK_THROWS_AS(cc::make_codec("topk", 1.5), std::invalid_argument);
  CHECK_THROWS_AS(cc::make_codec("int8", 0.05, 0), std::invalid_argument);
}
