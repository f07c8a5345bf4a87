// Host-side launchers of the CUDA kernels behind CudaBackend (gpu/cuda_backend.cu), one
// .cu file per op family in this folder. Each launcher enqueues its kernels on `stream`
// and checks every launch (gpu/cuda_check.hpp); none synchronises. Shapes, layouts and
// accumulate/overwrite semantics are those of runtime/backend/backend.hpp.
//
// Determinism: no kernel adds floats with atomics; every sum runs in an order fixed by
// the shapes, so the same inputs on the same GPU give bit-identical results.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dseek::gpu::kernels {

// Float scratch for the kernels that reduce in two stages; the backend allocates it
// once (and grows it on a larger shape only).
struct Scratch {
  float* data = nullptr;
  size_t floats = 0;
};

// --- encoder.cu -------------------------------------------------------------------
void encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                     const float* wpe, int B, int T, int C);
void encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout,
                      const int32_t* tokens, int B, int T, int C);
// The same on the wte rows [vocab_begin, vocab_begin + vocab_rows) (Backend::
// vocab_parallel_encoder_*); wpe may be null in forward.
void vocab_parallel_encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                                    const float* wte_slice, const float* wpe, int vocab_begin,
                                    int vocab_rows, int B, int T, int C);
void vocab_parallel_encoder_backward(cudaStream_t stream, float* dwte_slice, float* dwpe,
                                     const float* dout, const int32_t* tokens, int vocab_begin,
                                     int vocab_rows, int B, int T, int C);

// --- layernorm.cu -------------------------------------------------------------------
void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                       const float* inp, const float* w, const float* b, int N, int C);
// The output as bf16 bits (bf16 activations).
void layernorm_forward(cudaStream_t stream, uint16_t* out, float* mean, float* rstd,
                       const float* inp, const float* w, const float* b, int N, int C);
// Floats of scratch layernorm_backward needs for (N, C).
size_t layernorm_backward_scratch_floats(int N, int C);
void layernorm_backward(cudaStream_t stream, Scratch scratch, float* dinp, float* dw, float* db,
                        const float* dout, const float* inp, const float* w, const float* mean,
                        const float* rstd, int N, int C);

// --- matmul.cu (cuBLAS sgemm, fp32 accumulate, no TF32) ---------------------------------
void matmul_forward(cublasHandle_t handle, cudaStream_t stream, float* out, const float* inp,
                    const float* w, const float* bias, int N, int C, int OC);
size_t matmul_backward_scratch_floats(int N, int OC);
void matmul_backward(cublasHandle_t handle, cudaStream_t stream, Scratch scratch, float* dinp,
                     float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                     int N, int C, int OC);

// --- column_sums.cu: dst[c] += sum over rows of x[r, c], in two deterministic stages ----
size_t column_sums_scratch_floats(int N, int C);
void add_column_sums(cudaStream_t stream, Scratch scratch, float* dst, const float* x, int N,
                     int C);

// --- attention.cu (flash-style: saves the row logsumexp, recomputes probabilities) -----
// Largest head size the kernels handle (C / NH).
constexpr int kMaxHeadSize = 256;
// Floats of per-layer attention state (the `att` buffer): one logsumexp per query row and
// head.
size_t attention_state_floats(int B, int T, int NH);
// bf16: every product's operands rounded to bf16 (backend.hpp's attention_forward), the
// probabilities before they are normalized (as FlashAttention runs them in bf16).
void attention_forward(cudaStream_t stream, float* out, float* logsumexp, const float* qkv, int B,
                       int T, int C, int NH, bool bf16);
// Floats of scratch attention_backward needs (one per query row and head).
size_t attention_backward_scratch_floats(int B, int T, int NH);
// `out`: what attention_forward wrote (the tiled kernels take D_t = dout_t . out_t from it).
void attention_backward(cudaStream_t stream, Scratch scratch, float* dqkv, const float* dout,
                        const float* qkv, const float* out, const float* logsumexp, int B, int T,
                        int C, int NH, bool bf16);

// --- elementwise.cu ------------------------------------------------------------------
void gelu_forward(cudaStream_t stream, float* out, const float* inp, size_t n);
// The output as bf16 bits (bf16 activations).
void gelu_forward(cudaStream_t stream, uint16_t* out, const float* inp, size_t n);
void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                   size_t n);
void residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, size_t n);
// x[i] *= factor (Backend::scale: the loss scaler's unscaling of the gradients).
void scale(cudaStream_t stream, float* x, size_t n, float factor);

// --- cross_entropy.cu ------------------------------------------------------------------
void softmax_cross_entropy_forward(cudaStream_t stream, float* logits_to_probs, float* losses,
                                   const int32_t* targets, int N, int V);
void softmax_cross_entropy_backward(cudaStream_t stream, float* probs_to_dlogits,
                                    const int32_t* targets, int N, int V, float dloss);
// The vocabulary-parallel pieces (Backend::vocab_parallel_*) on a rank's (N, V_local)
// logits, the slice's ids starting at vocab_begin; sums_and_targets is 2N floats. The
// first V_real columns are ids of the data's vocabulary; the rest pad model.vocab and
// stay out of the maximum and the sums (probability 0).
void vocab_parallel_logit_max(cudaStream_t stream, float* max_slots, const float* logits, int N,
                              int V_local, int V_real, int rank, int ranks);
void vocab_parallel_exp_sums(cudaStream_t stream, float* logits_to_exps, float* sums_and_targets,
                             const float* max_slots, const int32_t* targets, int vocab_begin,
                             int V_local, int V_real, int N, int ranks);
void vocab_parallel_softmax_loss(cudaStream_t stream, float* exps_to_probs, float* losses,
                                 const float* sums_and_targets, int N, int V_local);
void vocab_parallel_cross_entropy_backward(cudaStream_t stream, float* probs_to_dlogits,
                                           const int32_t* targets, int vocab_begin, int V_local,
                                           int N, float dloss);

// --- adamw.cu ------------------------------------------------------------------------
void adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  int64_t step, float grad_scale);
// Backend::adamw_given_moment_update; `partials` holds given_moment_partials() doubles.
int given_moment_partials();
void adamw_given_moment_update(cudaStream_t stream, double* partials, float* params,
                               const float* grads, float* m, const float* v, size_t n,
                               float beta1, float eps, float clip_scale, float decay,
                               float step_size, float correction, double cap);

// --- reductions.cu: sum and sum of squares in double -----------------------------------
// `partials` holds reduction_partials() doubles and `result` one; the sum lands in
// *result (device memory), for the caller to copy back.
int reduction_partials();
void sum(cudaStream_t stream, double* partials, double* result, const float* x, size_t n,
         bool squares);

}  // namespace dseek::gpu::kernels
