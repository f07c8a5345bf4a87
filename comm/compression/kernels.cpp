#include "comm/compression/kernels.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace dseek::comm::compression::detail {

namespace {

constexpr size_t kFullSelectBelow = size_t{1} << 16;  // below this, nth_element over all n
constexpr size_t kSampleSize = size_t{1} << 14;
constexpr size_t kChunk = 1024;  // elements between two overflow checks of the candidate pass

// The k-th largest of keys[0..m) (non-negative or +inf, no NaN), and how many of the k
// chosen must be taken among the keys equal to it (the others are above it).
struct Threshold {
  float key;
  size_t ties_to_take;
};

// nth_element; reorders keys.
Threshold kth_largest(float* keys, size_t m, size_t k) {
  std::nth_element(keys, keys + (m - k), keys + m);
  const float thr = keys[m - k];
  size_t above = 0;  // every key above thr lies after position m - k
  for (size_t j = m - k + 1; j < m; ++j) above += keys[j] > thr ? 1 : 0;
  return {thr, k - above};
}

// A radix step first: the keys' bit patterns order like the keys, so a histogram of their
// top 16 bits finds the bin holding the k-th largest; nth_element then runs inside that
// bin only. keys is read, bin_keys (m floats) and histogram are scratch.
Threshold kth_largest_radix(const float* keys, size_t m, size_t k, float* bin_keys,
                            std::vector<uint32_t>& histogram) {
  constexpr size_t kBins = (0x7f800000u >> 16) + 1;  // +inf is the largest key
  histogram.assign(kBins, 0);
  uint32_t* hist = histogram.data();
  for (size_t j = 0; j < m; ++j) ++hist[std::bit_cast<uint32_t>(keys[j]) >> 16];
  size_t above = 0;  // keys in the bins above `bin`
  uint32_t bin = kBins - 1;
  while (above + hist[bin] < k) above += hist[bin--];
  size_t in_bin = 0;
  for (size_t j = 0; j < m; ++j) {
    bin_keys[in_bin] = keys[j];
    in_bin += (std::bit_cast<uint32_t>(keys[j]) >> 16) == bin ? 1 : 0;
  }
  // The bins above hold only keys greater than any in `bin`: all of them are taken.
  return kth_largest(bin_keys, in_bin, k - above);
}

// Appends to cand/cval the indices and values of g[begin, end) whose key is >= estimate,
// in index order; returns how many. Writes up to 8 entries past the returned count.
#if defined(__AVX2__)
// AVX2 left-packing: per 8 floats one compare, a movemask, and a permutation from a
// 256-entry table that moves the hits to the front; both stores are unconditional.
const std::array<uint64_t, 256> kLeftPack = [] {
  std::array<uint64_t, 256> t{};
  for (unsigned mask = 0; mask < 256; ++mask) {
    uint64_t lanes = 0;
    unsigned at = 0;
    for (unsigned b = 0; b < 8; ++b) {
      if ((mask >> b) & 1u) lanes |= uint64_t{b} << (8 * at++);
    }
    t[mask] = lanes;
  }
  return t;
}();

size_t collect_candidates(const float* g, size_t begin, size_t end, float estimate, uint32_t* cand,
                          float* cval) {
  const __m256 threshold = _mm256_set1_ps(estimate);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i eight = _mm256_set1_epi32(8);
  __m256i index = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                   _mm256_set1_epi32(static_cast<int>(begin)));
  size_t c = 0;
  size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 v = _mm256_loadu_ps(g + i);
    // !(|v| < estimate): true for NaN too, which topk_key ranks as +inf.
    const __m256 hit = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), threshold, _CMP_NLT_UQ);
    const auto mask = static_cast<unsigned>(_mm256_movemask_ps(hit));
    const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kLeftPack[mask])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(cand + c), _mm256_permutevar8x32_epi32(index, perm));
    _mm256_storeu_ps(cval + c, _mm256_permutevar8x32_ps(v, perm));
    c += static_cast<size_t>(std::popcount(mask));
    index = _mm256_add_epi32(index, eight);
  }
  for (; i < end; ++i) {
    cand[c] = static_cast<uint32_t>(i);
    cval[c] = g[i];
    c += topk_key(g[i]) >= estimate ? 1 : 0;
  }
  return c;
}
#else
// Portable: a vectorized loop writes one flag byte per element, then only the non-zero
// 8-byte words of the flags are expanded.
size_t collect_candidates(const float* g, size_t begin, size_t end, float estimate, uint32_t* cand,
                          float* cval) {
  alignas(64) uint8_t flags[kChunk];
  const size_t len = end - begin;
  const float* gb = g + begin;
#pragma omp simd
  for (size_t j = 0; j < len; ++j) flags[j] = topk_key(gb[j]) >= estimate ? 1 : 0;
  if (len < kChunk) std::memset(flags + len, 0, kChunk - len);
  size_t c = 0;
  for (size_t w = 0; w < (len + 7) / 8; ++w) {
    uint64_t word;
    std::memcpy(&word, flags + 8 * w, 8);
    while (word != 0) {
      const size_t j = 8 * w + static_cast<size_t>(std::countr_zero(word)) / 8;
      cand[c] = static_cast<uint32_t>(begin + j);
      cval[c] = gb[j];
      ++c;
      word &= word - 1;  // each flag byte is 0 or 1: this clears the lowest hit
    }
  }
  return c;
}
#endif
}  // namespace

void TopKSelector::select(const float* g, size_t n, size_t k, uint32_t* idx, float* values) {
  if (k == 0) return;
  if (k >= n) {
    std::iota(idx, idx + n, uint32_t{0});
    std::copy(g, g + n, values);
    return;
  }
  if (n < kFullSelectBelow) return select_full(g, n, k, idx, values);

  // 1. Estimate a threshold a little below the k-th key from a strided sample: the
  //    r-th largest of m sampled keys, r ~ 1.1 * m * k / n plus four standard deviations.
  const size_t m = kSampleSize;
  const size_t stride = n / m;
  sample_.resize(m);
  for (size_t j = 0; j < m; ++j) sample_[j] = topk_key(g[j * stride]);
  const double expected = static_cast<double>(m) * static_cast<double>(k) / static_cast<double>(n);
  const auto r = static_cast<size_t>(std::ceil(1.1 * expected + 4.0 * std::sqrt(expected) + 16.0));
  if (r >= m) return select_full(g, n, k, idx, values);
  std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(m - r), sample_.end());
  const float estimate = sample_[m - r];

  // 2. Collect the candidates (key >= estimate) in index order, chunk by chunk. The cap
  //    is checked once per chunk (the buffers have a chunk and 8 entries of slack).
  const size_t cap = std::min(n, 2 * k + 4096);
  if (candidates_.size() < cap + kChunk + 8) {
    candidates_.resize(cap + kChunk + 8);
    candidate_values_.resize(cap + kChunk + 8);
  }
  uint32_t* cand = candidates_.data();
  float* cval = candidate_values_.data();
  size_t c = 0;
  bool overflow = false;
  for (size_t base = 0; base < n; base += kChunk) {
    c += collect_candidates(g, base, std::min(n, base + kChunk), estimate, cand + c, cval + c);
    if (c > cap) {
      overflow = true;
      break;
    }
  }
  if (overflow || c < k) return select_full(g, n, k, idx, values);

  // 3. The exact k-th key among the candidates, then take them in index order, compacting
  //    in place (out <= j) without branches.
  if (candidate_keys_.size() < 2 * c) candidate_keys_.resize(2 * c);
  float* keys = candidate_keys_.data();
#pragma omp simd
  for (size_t j = 0; j < c; ++j) keys[j] = topk_key(cval[j]);
  auto [thr, ties] = kth_largest_radix(keys, c, k, keys + c, histogram_);
  size_t out = 0;
  for (size_t j = 0; j < c; ++j) {
    const float a = keys[j];
    const size_t tie = static_cast<size_t>(a == thr) & static_cast<size_t>(ties != 0);
    const size_t take = static_cast<size_t>(a > thr) | tie;
    ties -= tie;
    cand[out] = cand[j];
    cval[out] = cval[j];
    out += take;
  }
  std::copy(cand, cand + k, idx);
  std::copy(cval, cval + k, values);
}

void TopKSelector::select_full(const float* g, size_t n, size_t k, uint32_t* idx, float* values) {
  if (all_keys_.size() < n) all_keys_.resize(n);
  float* keys = all_keys_.data();
#pragma omp simd
  for (size_t i = 0; i < n; ++i) keys[i] = topk_key(g[i]);
  auto [thr, ties] = kth_largest(keys, n, k);
  size_t out = 0;
  for (size_t i = 0; i < n && out < k; ++i) {
    const float a = topk_key(g[i]);
    if (a > thr || (a == thr && ties > 0)) {
      if (a == thr) --ties;
      idx[out] = static_cast<uint32_t>(i);
      values[out] = g[i];
      ++out;
    }
  }
}

void quantize_blocks(const float* x, size_t m, size_t block, std::byte* scales_out, int8_t* q_out) {
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: (v + M) - M rounds v to nearest
  for (size_t b0 = 0, bi = 0; b0 < m; b0 += block, ++bi) {
    const size_t len = std::min(block, m - b0);
    const float* xb = x + b0;
    int8_t* qb = q_out + b0;
    float amax = 0.0f;
    float poison = 0.0f;  // x * 0 is 0 for finite x, NaN for inf and NaN
#pragma omp simd reduction(max : amax) reduction(+ : poison)
    for (size_t i = 0; i < len; ++i) {
      const float a = xb[i] < 0.0f ? -xb[i] : xb[i];
      amax = a > amax ? a : amax;
      poison += xb[i] * 0.0f;
    }
    if (poison != 0.0f) {  // NaN: the block holds an inf or a NaN
      store_f32(scales_out + 4 * bi, std::numeric_limits<float>::quiet_NaN());
      std::memset(qb, 0, len);
      continue;
    }
    const float scale = amax / 127.0f;
    store_f32(scales_out + 4 * bi, scale);
    if (amax == 0.0f) {
      std::memset(qb, 0, len);
      continue;
    }
    const float inv = 127.0f / amax;
    if (inv <= std::numeric_limits<float>::max()) {
#pragma omp simd
      for (size_t i = 0; i < len; ++i) {
        float v = xb[i] * inv;
        v = v > 127.0f ? 127.0f : v;
        v = v < -127.0f ? -127.0f : v;
        v = (v + kRoundMagic) - kRoundMagic;
        qb[i] = static_cast<int8_t>(static_cast<int32_t>(v));
      }
    } else {  // max|x| below ~3.7e-37: 127 / max overflows; divide by the (subnormal) scale
      for (size_t i = 0; i < len; ++i) {
        float v = xb[i] / scale;
        v = v > 127.0f ? 127.0f : v;
        v = v < -127.0f ? -127.0f : v;
        qb[i] = static_cast<int8_t>(static_cast<int32_t>(std::nearbyint(v)));
      }
    }
  }
}

void dequantize_add_blocks(const std::byte* scales_in, const int8_t* q, size_t m, size_t block,
                           float* acc, float alpha) {
  for (size_t b0 = 0, bi = 0; b0 < m; b0 += block, ++bi) {
    const size_t len = std::min(block, m - b0);
    const float s = alpha * load_f32(scales_in + 4 * bi);
    const int8_t* qb = q + b0;
    float* ab = acc + b0;
#pragma omp simd
    for (size_t i = 0; i < len; ++i) ab[i] += static_cast<float>(qb[i]) * s;
  }
}

}  // namespace dseek::comm::compression::detail
