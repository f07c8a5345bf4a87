// The compute backend: every op the GPT model and its optimizer need, declared once.
// The model code (runtime/model) calls only these; the CPU implementation is
// cpu_backend.cpp and the CUDA one (gpu/) fits beside it without changing the model.
//
// Conventions, as in llm.c: row-major float32 arrays, N = rows (tokens, B*T),
// C = channels, OC = output channels. A linear layer's weight is (OC, C) and computes
// out = inp @ w^T + bias, as PyTorch's nn.Linear does, so weights load unchanged.
// Pointers are the backend's memory (host for the CPU, device for CUDA); only the
// memory calls move data between the host and the backend.
//
// Gradient arguments named d<param> ACCUMULATE (+=): micro-batches add up. Activation
// gradients OVERWRITE, except layernorm_backward's dinp, which accumulates because it is
// the residual stream's gradient (the residual connection adds the two branches).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend/host_memory.hpp"

namespace dseek::backend {

// Bytes of the backend's memory held by live allocate() blocks, now and at most so far.
struct MemoryUsage {
  size_t in_use_bytes = 0;
  size_t peak_bytes = 0;
};

// The precision of one matmul (train.precision; model/precision_policy.hpp picks
// it per call). Accumulation is fp32 in every format; the FP32 master weights stay in
// the model's params() and are rounded or quantized per call, never overwritten.
//   bf16: inputs, weights and output gradients rounded to bf16 (nearest even).
//   fp8:  inputs and weights quantized to E4M3, output gradients to E5M2
//         (numerics/fp8.hpp), each as fp8(x * scale) with its own per-tensor scale; the
//         product is multiplied back by 1 / (scale_a * scale_b), as cuBLASLt's
//         A/B scale pointers do. The op raises each operand's amax to max |x|
//         (delayed scaling: numerics/delayed_scaling.hpp).
// A CUDA backend maps this onto cuBLASLt: bf16 operands with fp32 compute, or FP8
// operands with `scale` and `amax` passed as device pointers (one float each).
enum class MatmulFormat { fp32, bf16, fp8 };
struct Fp8OperandScaling {
  const float* scale = nullptr;  // backend memory, 1 float
  float* amax = nullptr;         // backend memory, 1 float
};
struct MatmulPrecision {
  MatmulFormat format = MatmulFormat::fp32;
  Fp8OperandScaling inp, weight;  // E4M3, fp8 only
  Fp8OperandScaling dout;         // E5M2, fp8 only (backward)
};

// The vocabulary rows [begin, begin + rows) one rank of a tensor-parallel group holds:
// its slice of the vocabulary-parallel embedding and head (model/tensor_parallel_layout.hpp).
// An embedding or logits buffer given with a slice holds those rows only, row 0 being
// vocabulary id `begin`; whole() is every id, for the whole model's ops.
// `padded`: the slice's last rows that are padding of model.vocab beyond the data's
// vocabulary (llm.c's Vp > V): they take no part in the softmax (probability 0, so a
// zero logit gradient) and are never targets.
struct VocabSlice {
  int begin = 0;
  int rows = 0;
  int padded = 0;
  static constexpr VocabSlice whole(int vocab) { return {0, vocab, 0}; }
  constexpr bool holds(int32_t id) const { return id >= begin && id - begin < rows; }
  constexpr int real_rows() const { return rows - padded; }
};

// Time and floating-point work of the linear layers' GEMMs so far (matmul_forward,
// matmul_backward and their mixed variants, not attention's), for benchmarks.
struct MatmulCounters {
  double seconds = 0.0;
  double flops = 0.0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // What runs the matmuls, for benchmarks to print (the CPU: oneDNN's version, the ISA it
  // dispatched to and the implementation of each primitive so far); empty by default.
  virtual std::string matmul_kernels() const { return {}; }
  // MatmulCounters since construction; zeros for a backend that does not count them.
  virtual MatmulCounters matmul_counters() const { return {}; }

  // --- memory -------------------------------------------------------------------
  virtual void* allocate(size_t bytes) = 0;  // zero-filled
  virtual void release(void* pointer) = 0;
  virtual void zero(float* x, size_t n) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // Within this backend's memory (device to device), queued like an op: a pipeline
  // stage hands its activations to NCCL in buffers of its own this way.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual MemoryUsage memory_usage() const = 0;
  // True when pointers of this backend are plain host memory (the CPU backend): code
  // that needs the values on the host may then read them in place instead of copying
  // them to host staging. False for a device (CUDA) and for the scrambled test device.
  virtual bool memory_is_host() const { return false; }
  // Host memory suited to this backend's copies (host_memory.hpp): pinned for CUDA,
  // ordinary aligned memory otherwise. The CPU offload keeps its host copies there.
  virtual std::shared_ptr<HostMemory> host_memory() const { return aligned_host_memory(); }
  // copy_from_host that may return before the copy is done (CUDA: queued on a copy
  // stream, which runs beside the compute; every op queued after this call waits for the
  // copy's event on the device, not on the host). `host_src` must stay unchanged until
  // finish_copies() or a call that returns data to the host (copy_to_host, sum,
  // sum_squares) -- and should be host_memory() memory: pageable memory makes the
  // driver copy synchronously. The default is synchronous (the CPU and scrambled
  // backends).
  virtual void copy_from_host_async(void* dst, const void* host_src, size_t bytes) {
    copy_from_host(dst, host_src, bytes);
  }
  // Waits until every copy_from_host_async so far has read its host source.
  virtual void finish_copies() {}
  // Waits until every op queued so far has finished writing its outputs, so that a data
  // plane that reads this backend's memory on its own queue (NCCL on its CUDA stream)
  // sees them. No-op where ops finish before they return (the CPU and scrambled ones).
  virtual void finish_compute() {}

  // --- forward ops ----------------------------------------------------------------
  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
  virtual void encoder_forward(float* out, const int32_t* tokens, const float* wte,
                               const float* wpe, int B, int T, int C) = 0;
  // out = (inp - mean) * rstd * w + b per row; mean and rstd (N) are saved for backward.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* w, const float* b, int N, int C) = 0;
  // out (N, OC) = inp (N, C) @ w^T + bias; bias may be null.
  virtual void matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                              int N, int C, int OC) = 0;
  // Causal multi-head self-attention. qkv is (B, T, 3C) = [q | k | v], heads of C/NH
  // channels; out is (B, T, C). `att` holds attention_state_floats(B, T, C, NH) floats:
  // what this backend keeps for attention_backward, in its own layout (the CPU and CUDA:
  // the logsumexp of each score row (B, NH, T), probabilities recomputed in backward, so
  // memory grows with T, not T x T). Only attention_backward reads it.
  // `format` fp32: every product in fp32; bf16 (train.precision = "bf16"): the operands of
  // each product rounded to bf16 (Q, K, V, the probabilities P, and in backward dO and the
  // score gradients dS), fp32 accumulation and softmax, as PyTorch's bf16 autocast runs
  // attention's matmuls. fp8 is refused (std::invalid_argument).
  virtual size_t attention_state_floats(int B, int T, int C, int NH) const = 0;
  virtual void attention_forward(float* out, float* att, const float* qkv, int B, int T,
                                 int C, int NH, MatmulFormat format) = 0;
  // Causal attention of n new tokens of one sequence against its KV cache (generation,
  // runtime/infer/): qkv (n, 3C) holds the new tokens' [q | k | v]; their k and v are
  // first stored in rows [past, past + n) of k_cache and v_cache (each (capacity, C),
  // capacity >= past + n), then the query of new token i (position past + i) attends to
  // the keys of positions 0 .. past + i. out is (n, C). Nothing is kept for a backward.
  // The default refuses, naming the backend (a backend without it cannot generate).
  virtual void attention_forward_cached(float* out, const float* qkv, float* k_cache,
                                        float* v_cache, int past, int n, int C, int NH);
  // GELU, tanh approximation (GPT-2's).
  virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
  virtual void residual_forward(float* out, const float* a, const float* b, size_t n) = 0;
  // In place: logits (N, V) become softmax probabilities; losses[i] = -log p[targets[i]].
  virtual void softmax_cross_entropy_forward(float* logits_to_probs, float* losses,
                                             const int32_t* targets, int N, int V) = 0;

  // --- backward ops ---------------------------------------------------------------
  // In place: probs become dlogits = (probs - onehot(targets)) * dloss.
  virtual void softmax_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets,
                                              int N, int V, float dloss) = 0;
  // dinp = dout @ w (overwrite); dw += dout^T @ inp; dbias += column sums (may be null).
  virtual void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                               const float* inp, const float* w, int N, int C, int OC) = 0;
  // The same two matmuls in `precision`. The default runs fp32 through matmul_forward /
  // matmul_backward above and refuses the other formats, naming train.precision.
  virtual void mixed_matmul_forward(float* out, const float* inp, const float* w,
                                    const float* bias, int N, int C, int OC,
                                    const MatmulPrecision& precision);
  virtual void mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                     const float* inp, const float* w, int N, int C, int OC,
                                     const MatmulPrecision& precision);
  // bf16 activations: under train.precision = "bf16" the outputs of the LayerNorms and
  // of the GELU feed bf16 matmuls only, so the model keeps them as bf16 (the bits,
  // rounded to nearest even) and the matmuls read them without a cast of their own. The
  // numbers are those of the fp32 op followed by the bf16 matmul's rounding of its input.
  virtual void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                                      const float* w, const float* b, int N, int C) = 0;
  virtual void gelu_forward_bf16(uint16_t* out, const float* inp, size_t n) = 0;
  // mixed_matmul_forward / backward in MatmulFormat::bf16 on such an input.
  virtual void bf16_input_matmul_forward(float* out, const uint16_t* inp, const float* w,
                                         const float* bias, int N, int C, int OC) = 0;
  virtual void bf16_input_matmul_backward(float* dinp, float* dw, float* dbias,
                                          const float* dout, const uint16_t* inp,
                                          const float* w, int N, int C, int OC) = 0;
  // dinp = gelu'(inp) * dout; dinp may alias dout.
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;
  // dqkv (overwrite) from dout, and from what attention_forward wrote: its output `out`
  // (unchanged since; a backend may use it, e.g. for D_t = dout_t . out_t, or not) and
  // its saved state `att`.
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* att, int B, int T, int C,
                                  int NH, MatmulFormat format) = 0;
  // dinp += ..., dw += ..., db += ...
  virtual void layernorm_backward(float* dinp, float* dw, float* db, const float* dout,
                                  const float* inp, const float* w, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += dout[b,t]
  virtual void encoder_backward(float* dwte, float* dwpe, const float* dout,
                                const int32_t* tokens, int B, int T, int C) = 0;

  // --- vocabulary-parallel embedding and cross-entropy (tensor parallelism) ------------
  // A tensor-parallel rank holds the embedding rows and the head's logits of its
  // VocabSlice only. These ops are its halves of Megatron-LM's vocabulary-parallel
  // embedding and cross-entropy, split where the group's sum all-reduces go (the model
  // runs those; what crosses is (N, ranks) maxima and 2N sums, never the logits).
  //
  // out[b,t,:] = (tokens[b,t] held ? wte_slice[tokens[b,t] - slice.begin,:] : 0)
  //              + (wpe ? wpe[t,:] : 0); out is overwritten. The group sums the ranks'
  // outputs, so one rank alone passes wpe.
  virtual void vocab_parallel_encoder_forward(float* out, const int32_t* tokens,
                                              const float* wte_slice, const float* wpe,
                                              VocabSlice slice, int B, int T, int C) = 0;
  // dwte_slice[tokens[b,t] - slice.begin] += dout[b,t] for the held tokens only;
  // dwpe[t] += dout[b,t] for every token.
  virtual void vocab_parallel_encoder_backward(float* dwte_slice, float* dwpe,
                                               const float* dout, const int32_t* tokens,
                                               VocabSlice slice, int B, int T, int C) = 0;
  // Step 1 of the cross-entropy on this rank's logits (N, slice.rows): max_slots (N, ranks)
  // is overwritten with the row maxima (of the slice's real rows; the lowest float when it
  // has none) in column `rank` and zeros elsewhere, so that a sum all-reduce over the
  // group gives every rank every rank's maximum, exactly.
  virtual void vocab_parallel_logit_max(float* max_slots, const float* logits,
                                        VocabSlice slice, int N, int rank, int ranks) = 0;
  // Step 2, after that all-reduce: with m the maximum of row n's slots, the logits become
  // exp(logit - m) in place; sums_and_targets (2N) is overwritten with [the row sums of
  // those | logit[target] - m where this rank holds the target, 0 elsewhere], for the
  // second sum all-reduce. V_local = slice.rows. The padded rows (slice.padded) become 0
  // and are left out of the sum.
  virtual void vocab_parallel_exp_sums(float* logits_to_exps, float* sums_and_targets,
                                       const float* max_slots, const int32_t* targets,
                                       VocabSlice slice, int N, int ranks) = 0;
  // Step 3, after it: the exponentials become this rank's slice of the probabilities
  // (divided by the group's sum) and losses[n] = log(sum) - (target logit - m)
  // (overwritten), as softmax_cross_entropy_forward leaves its buffers.
  virtual void vocab_parallel_softmax_loss(float* exps_to_probs, float* losses,
                                           const float* sums_and_targets, int N,
                                           int V_local) = 0;
  // softmax_cross_entropy_backward on the slice's probabilities (N, slice.rows): the
  // one-hot is subtracted on the rank that holds the target only.
  virtual void vocab_parallel_cross_entropy_backward(float* probs_to_dlogits,
                                                     const int32_t* targets, VocabSlice slice,
                                                     int N, float dloss) = 0;

  // --- optimizer and reductions ------------------------------------------------------
  // Sum of x[i]^2 in double, in an order fixed by the backend's thread count.
  virtual double sum_squares(const float* x, size_t n) = 0;
  // Sum of x[i] in double (the mean loss).
  virtual double sum(const float* x, size_t n) = 0;
  // x[i] *= factor, in place: dynamic loss scaling unscales the gradients where they
  // live (optim/loss_scaler.hpp); exact for a power-of-two factor, barring underflow.
  virtual void scale(float* x, size_t n, float factor) = 0;
  // AdamW (decoupled weight decay) on n parameters, with g = grads * grad_scale.
  // `step` counts from 1 (bias correction).
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                            float lr, float beta1, float beta2, float eps,
                            float weight_decay, int64_t step, float grad_scale) = 0;
  // AdamW's step with a given second moment v (read, not written, already bias-corrected:
  // optim/adamw.hpp, compressed gradients) on one tensor's n parameters: m = beta1 m +
  // (1 - beta1) g clip_scale, then p = p decay - s step_size m / (sqrt(v) + eps), where s
  // scales the tensor's update m correction / (sqrt(v) + eps) down to an RMS of `cap`
  // when it is above it (Adafactor's update clipping; cap <= 0: s = 1). The RMS is summed
  // in double: on the CPU in element order, so its bits are the host loop's.
  virtual void adamw_given_moment_update(float* params, const float* grads, float* m,
                                         const float* v, size_t n, float beta1, float eps,
                                         float clip_scale, float decay, float step_size,
                                         float correction, double cap) = 0;
};

// The CPU backend: OpenBLAS sgemm (fp32), oneDNN (bf16) and vectorized loops on `threads`
// threads (0 = all cores). Results are deterministic for a given thread count.
std::unique_ptr<Backend> make_cpu_backend(int threads);
// The same, allocating its memory from `memory` (the gradient_shard actors' moments, in
// the trainer backend's host memory: pinned when it is a CUDA device's).
std::unique_ptr<Backend> make_cpu_backend(int threads, std::shared_ptr<HostMemory> memory);

}  // namespace dseek::backend
