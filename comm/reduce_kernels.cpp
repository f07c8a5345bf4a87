// Reduction loops. Written as plain loops over restrict-free pointers so g++ vectorises
// them (the library is built with -march=x86-64-v3); bf16 goes through fp32.
#include "comm/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>

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

}  // namespace

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
