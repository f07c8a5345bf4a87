// The Backend interface's defaults (backend.hpp): of the mixed-precision matmuls, fp32 is
// the plain matmul and a backend that has no bf16 or fp8 GEMM refuses them by name; a
// backend without the KV-cache attention of generation refuses it by name.
#include <stdexcept>
#include <string>

#include "runtime/backend/backend.hpp"

namespace dseek::backend {

namespace {
void refuse(const Backend& backend, MatmulFormat format) {
  throw std::runtime_error("train.precision = \"" +
                           std::string(format == MatmulFormat::bf16 ? "bf16" : "fp8") +
                           "\" is not implemented by the " + backend.name() + " backend");
}
}  // namespace

void Backend::mixed_matmul_forward(float* out, const float* inp, const float* w,
                                   const float* bias, int N, int C, int OC,
                                   const MatmulPrecision& precision) {
  if (precision.format != MatmulFormat::fp32) refuse(*this, precision.format);
  matmul_forward(out, inp, w, bias, N, C, OC);
}

void Backend::mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                    const float* inp, const float* w, int N, int C, int OC,
                                    const MatmulPrecision& precision) {
  if (precision.format != MatmulFormat::fp32) refuse(*this, precision.format);
  matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC);
}

void Backend::attention_forward_cached(float*, const float*, float*, float*, int, int, int,
                                       int) {
  throw std::runtime_error("the " + name() +
                           " backend has no KV-cache attention: text generation runs on the "
                           "cpu backend in this build");
}

}  // namespace dseek::backend
