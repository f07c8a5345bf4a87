// The arithmetic of the collectives: element-wise reduction of two buffers, scaling for
// averages, and fp32 accumulation for algorithms that can keep partial sums in fp32.
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace dseek::comm {

// dst[i] = a[i] op b[i] for count elements (avg combines like sum; scale afterwards).
// dst may alias a or b. Throws CommError(invalid_argument) for u8.
void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

// buf[i] *= factor (for avg: factor = 1 / ranks). A no-op for other ops.
void scale_in_place(void* buf, size_t count, DataType type, float factor);

// acc[i] = first ? src[i] : acc[i] op src[i], in fp32 whatever the type of src.
void accumulate_f32(float* acc, const void* src, size_t count, DataType type, ReduceOp op, bool first);

// dst[i] = acc[i] * factor, converted to the type of dst.
void store_from_f32(void* dst, const float* acc, size_t count, DataType type, float factor);

// Throws CommError(invalid_argument) unless `type` can be reduced.
void require_reducible(DataType type);

}  // namespace dseek::comm
