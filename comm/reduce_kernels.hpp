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

// dst_a[i] = dst_b[i] = (src[0][i] op src[1][i] op ... op src[n-1][i]) * factor, in fp32
// and in that order (the bits of accumulate_f32 over the sources, then store_from_f32),
// in one pass over the sources: every stream is read or written once, concurrently (2
// sources of 512 KiB in cache, one thread: 46 us against 51-60 us for accumulate_f32 +
// store_from_f32 in 16 KiB blocks, against 19 us for one memcpy). Either destination may
// alias a source. Fused for n of 2 to 4; other n go block by block.
void reduce_sources_f32(void* dst_a, void* dst_b, const void* const* src, int n, size_t count, DataType type,
                        ReduceOp op, float factor);

// Throws CommError(invalid_argument) unless `type` can be reduced.
void require_reducible(DataType type);

}  // namespace dseek::comm
