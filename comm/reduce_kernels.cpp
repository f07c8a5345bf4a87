// Reduction loops. Written as plain loops over restrict-free pointers so g++ vectorises
// them (the library is built with -march=x86-64-v3); bf16 goes through fp32.
#include "comm/reduce_kernels.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "comm/bf16.hpp"

namespace dseek::comm {

void require_reducible(DataType type) {
  if (type == DataType::u8) throw CommError(ErrorKind::invalid_argument, "cannot reduce u8 buffers");
}

namespace {

template <class Combine>
void reduce_f32(float* dst, const float* a, const float* b, size_t n, Combine combine) {
  for (size_t i = 0; i < n; ++i) dst[i] = combine(a[i], b[i]);
}

template <class Combine>
void reduce_bf16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, Combine combine) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = float_to_bf16(combine(bf16_to_float(a[i]), bf16_to_float(b[i])));
}

struct Sum {
  float operator()(float x, float y) const { return x + y; }
};
struct Max {
  float operator()(float x, float y) const { return std::max(x, y); }
};

float load_f32(float x) { return x; }
float load_f32(uint16_t x) { return bf16_to_float(x); }
template <class T>
T store_as(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return float_to_bf16(x);
}

// The fused loop of reduce_sources_f32, with the source count known to the compiler.
// Through a register-sized accumulator: the destinations may alias a source, so a plain
// loop over the arrays would get a runtime alias check that fails in place (same
// addresses) and runs scalar; the local accumulator aliases nothing.
template <int N, class T, class Combine>
void reduce_sources_n(T* da, T* db, const void* const* src, size_t count, Combine combine, float factor) {
  constexpr size_t kLanes = 64;  // 8 AVX2 registers of fp32
  const T* s[N];
  for (int r = 0; r < N; ++r) s[r] = static_cast<const T*>(src[r]);
  for (size_t i = 0; i < count; i += kLanes) {
    const size_t len = std::min(kLanes, count - i);
    float acc[kLanes];
    if (len == kLanes) {  // constant trip counts: fully vectorised; the tail below is the same with `len`
      for (size_t j = 0; j < kLanes; ++j) acc[j] = load_f32(s[0][i + j]);
      for (int r = 1; r < N; ++r)
        for (size_t j = 0; j < kLanes; ++j) acc[j] = combine(acc[j], load_f32(s[r][i + j]));
      for (size_t j = 0; j < kLanes; ++j) da[i + j] = store_as<T>(acc[j] * factor);
      for (size_t j = 0; j < kLanes; ++j) db[i + j] = store_as<T>(acc[j] * factor);
    } else {
      for (size_t j = 0; j < len; ++j) acc[j] = load_f32(s[0][i + j]);
      for (int r = 1; r < N; ++r)
        for (size_t j = 0; j < len; ++j) acc[j] = combine(acc[j], load_f32(s[r][i + j]));
      for (size_t j = 0; j < len; ++j) da[i + j] = store_as<T>(acc[j] * factor);
      for (size_t j = 0; j < len; ++j) db[i + j] = store_as<T>(acc[j] * factor);
    }
  }
}

template <class T, class Combine>
bool reduce_sources_fused(void* da, void* db, const void* const* src, int n, size_t count, Combine combine,
                          float factor) {
  auto* a = static_cast<T*>(da);
  auto* b = static_cast<T*>(db);
  switch (n) {
    case 2: reduce_sources_n<2>(a, b, src, count, combine, factor); return true;
    case 3: reduce_sources_n<3>(a, b, src, count, combine, factor); return true;
    case 4: reduce_sources_n<4>(a, b, src, count, combine, factor); return true;
    default: return false;
  }
}

}  // namespace

void reduce_sources_f32(void* dst_a, void* dst_b, const void* const* src, int n, size_t count, DataType type,
                        ReduceOp op, float factor) {
  require_reducible(type);
  const bool is_max = op == ReduceOp::max;
  const bool fused = type == DataType::f32
                         ? (is_max ? reduce_sources_fused<float>(dst_a, dst_b, src, n, count, Max{}, factor)
                                   : reduce_sources_fused<float>(dst_a, dst_b, src, n, count, Sum{}, factor))
                         : (is_max ? reduce_sources_fused<uint16_t>(dst_a, dst_b, src, n, count, Max{}, factor)
                                   : reduce_sources_fused<uint16_t>(dst_a, dst_b, src, n, count, Sum{}, factor));
  if (fused) return;
  // Block by block through an fp32 accumulator small enough for L1.
  constexpr size_t kBlock = 2048;
  float acc[kBlock];
  const size_t es = element_size(type);
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t len = std::min(kBlock, count - done);
    for (int r = 0; r < n; ++r) accumulate_f32(acc, static_cast<const std::byte*>(src[r]) + done * es, len, type, op, r == 0);
    store_from_f32(static_cast<std::byte*>(dst_a) + done * es, acc, len, type, factor);
    store_from_f32(static_cast<std::byte*>(dst_b) + done * es, acc, len, type, factor);
  }
}

void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  require_reducible(type);
  const bool is_max = op == ReduceOp::max;
  if (type == DataType::f32) {
    auto* d = static_cast<float*>(dst);
    auto* x = static_cast<const float*>(a);
    auto* y = static_cast<const float*>(b);
    if (is_max) reduce_f32(d, x, y, count, Max{});
    else reduce_f32(d, x, y, count, Sum{});
  } else {
    auto* d = static_cast<uint16_t*>(dst);
    auto* x = static_cast<const uint16_t*>(a);
    auto* y = static_cast<const uint16_t*>(b);
    if (is_max) reduce_bf16(d, x, y, count, Max{});
    else reduce_bf16(d, x, y, count, Sum{});
  }
}

void scale_in_place(void* buf, size_t count, DataType type, float factor) {
  require_reducible(type);
  if (type == DataType::f32) {
    auto* p = static_cast<float*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] *= factor;
  } else {
    auto* p = static_cast<uint16_t*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = float_to_bf16(bf16_to_float(p[i]) * factor);
  }
}

void accumulate_f32(float* acc, const void* src, size_t count, DataType type, ReduceOp op, bool first) {
  require_reducible(type);
  const bool is_max = op == ReduceOp::max;
  if (type == DataType::f32) {
    auto* s = static_cast<const float*>(src);
    if (first) std::copy(s, s + count, acc);
    else if (is_max) reduce_f32(acc, acc, s, count, Max{});
    else reduce_f32(acc, acc, s, count, Sum{});
  } else {
    auto* s = static_cast<const uint16_t*>(src);
    if (first) {
      for (size_t i = 0; i < count; ++i) acc[i] = bf16_to_float(s[i]);
    } else if (is_max) {
      for (size_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], bf16_to_float(s[i]));
    } else {
      for (size_t i = 0; i < count; ++i) acc[i] += bf16_to_float(s[i]);
    }
  }
}

void store_from_f32(void* dst, const float* acc, size_t count, DataType type, float factor) {
  require_reducible(type);
  if (type == DataType::f32) {
    auto* d = static_cast<float*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = acc[i] * factor;
  } else {
    auto* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = float_to_bf16(acc[i] * factor);
  }
}

}  // namespace dseek::comm
