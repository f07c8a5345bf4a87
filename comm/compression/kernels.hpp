// Internal kernels shared by the codecs: exact top-k selection and block int8
// quantization. Not part of the codec API.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dseek::comm::compression::detail {

[[gnu::always_inline]] inline float load_f32(const std::byte* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline uint32_t load_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store_f32(std::byte* p, float v) { std::memcpy(p, &v, sizeof v); }

// The ranking key of a value: |x|, with NaN ranked as +inf so that a NaN gradient is
// always sent (and noticed) rather than silently dropped. A select, so loops vectorize.
// (The sign bit is cleared, so -0 ranks as +0 and the key's bits order like the key.)
[[gnu::always_inline]] inline float topk_key(float x) {
  const float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu);
  return a == a ? a : __builtin_inff();
}

// Picks the k largest topk_key(g[i]) of g[0..n) and writes their indices, ascending, to
// idx[0..k). Ties at the k-th key keep the lowest indices, so the choice is deterministic.
//
// Cost. The plain way, nth_element over a copy of all n keys, is O(n) but with a large
// constant: ~5-10 ns per element (random access, branchy partitioning), i.e. 0.1-0.2 s
// for 16M floats, and it needs 4n bytes of scratch. Instead, for n >= 65536:
//   1. the threshold of the top ~1.1k+ is estimated from a strided sample of 16384 keys
//      (nth_element on the sample, negligible);
//   2. one streaming pass collects the indices and values whose key is >= that estimate
//      (about 1.1k-1.3k candidates), branch-free (AVX2 left-packing where available);
//   3. the exact k-th key among the candidates: a radix step (a histogram of the top 16
//      bits of the keys, then nth_element inside the one bin that holds the k-th key;
//      ~2 ms for 1M candidates against ~13 ms for nth_element over all of them), and a
//      branch-free walk over the candidates (already in index order) takes the k.
// g is read once from memory; 16M floats take ~25 ms on one core (vs ~150 ms plain).
// The result is exactly that of the plain way. When the estimate misses (fewer than k
// candidates, or more than 2k + 4096: heavy ties, adversarial layouts) it falls back to
// the plain way over all n (allocating its 4n-byte scratch on first use).
class TopKSelector {
 public:
  // Writes the k indices to idx and the values g[idx[j]] to values.
  void select(const float* g, size_t n, size_t k, uint32_t* idx, float* values);

 private:
  void select_full(const float* g, size_t n, size_t k, uint32_t* idx, float* values);

  std::vector<float> sample_;
  std::vector<uint32_t> candidates_;      // indices, ascending
  std::vector<float> candidate_values_;   // g at those indices (so g is read once)
  std::vector<float> candidate_keys_;     // reordered by nth_element
  std::vector<uint32_t> histogram_;
  std::vector<float> all_keys_;           // fallback only
};

// Block quantization of x[0..m): for each block of `block` values (the last may be
// shorter) one fp32 scale = max|x| / 127, written to scales_out (4 bytes each, any
// alignment), and q = round(x / scale) clamped to [-127, 127]. A block holding a NaN or
// inf gets scale NaN and q = 0.
void quantize_blocks(const float* x, size_t m, size_t block, std::byte* scales_out, int8_t* q_out);

// acc[i] += alpha * scale(block of i) * q[i] for i < m (contiguous).
void dequantize_add_blocks(const std::byte* scales_in, const int8_t* q, size_t m, size_t block,
                           float* acc, float alpha);

inline size_t block_count(size_t m, size_t block) { return (m + block - 1) / block; }

}  // namespace dseek::comm::compression::detail
