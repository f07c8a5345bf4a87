// The self-check of matmul_rate: every product of gpu/cublaslt_gemm.hpp (BF16 forward
// with fp32 and bf16 outputs, both backward products; on FP8 devices the same in FP8,
// with fp8 output, d_scale and amax_d) and the conversions of gpu/precision_convert.hpp,
// on small shapes, against a plain fp32 kernel fed the same rounded values. Outputs
// start as NaN, so an element the GEMM did not write fails. Bounds: 1e-4 of the largest
// output for fp32 outputs (only the summation order differs), 1e-2 for bf16 outputs,
// 7e-2 for an e4m3 output (3 mantissa bits), 0.1 for FP8 against the unquantized
// product, exact for amax and for the transposing cast.
#pragma once

#include "gpu/cublaslt_gemm.hpp"

namespace dseek::bench {

// Runs the checks (FP8 ones when `fp8`), prints one line per check, and returns how
// many failed.
int check_gemm_products(gpu::CublasLtGemm& gemm, bool fp8);

}  // namespace dseek::bench
