// The CPU backend (backend.hpp): OpenBLAS sgemm (fp32) and oneDNN matmuls (bf16,
// cpu_onednn_gemm.hpp) on blocks split across dseek's own thread pool, and fused, vectorized loops for everything else. Each group of ops lives
// in its own cpu_*.cpp file; this header is shared by them only.
#pragma once

#include <atomic>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/cpu_onednn_gemm.hpp"
#include "runtime/util/thread_pool.hpp"

namespace dseek::backend {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads, std::shared_ptr<HostMemory> memory = aligned_host_memory());
  std::string name() const override { return "cpu"; }
  std::string matmul_kernels() const override;
  MatmulCounters matmul_counters() const override { return counters_; }
  int threads() const { return pool_.size(); }

  void* allocate(size_t bytes) override;
  void release(void* pointer) override;
  void zero(float* x, size_t n) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  MemoryUsage memory_usage() const override;
  bool memory_is_host() const override { return true; }
  std::shared_ptr<HostMemory> host_memory() const override { return memory_; }

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* w, const float* b, int N, int C) override;
  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N,
                      int C, int OC) override;
  size_t attention_state_floats(int B, int T, int C, int NH) const override;
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH, MatmulFormat format) override;
  void attention_forward_cached(float* out, const float* qkv, float* k_cache, float* v_cache,
                                int past, int n, int C, int NH) override;
  void gelu_forward(float* out, const float* inp, size_t n) override;
  void residual_forward(float* out, const float* a, const float* b, size_t n) override;
  void softmax_cross_entropy_forward(float* logits_to_probs, float* losses,
                                     const int32_t* targets, int N, int V) override;

  void softmax_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets, int N,
                                      int V, float dloss) override;
  void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                       const float* inp, const float* w, int N, int C, int OC) override;
  void mixed_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                            int N, int C, int OC, const MatmulPrecision& precision) override;
  void mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                             const float* inp, const float* w, int N, int C, int OC,
                             const MatmulPrecision& precision) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override;
  // cpu_activations_bf16.cpp: the fp32 ops' values, rounded to bf16 in cache.
  void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                              const float* w, const float* b, int N, int C) override;
  void gelu_forward_bf16(uint16_t* out, const float* inp, size_t n) override;
  void bf16_input_matmul_forward(float* out, const uint16_t* inp, const float* w,
                                 const float* bias, int N, int C, int OC) override;
  void bf16_input_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                  const uint16_t* inp, const float* w, int N, int C,
                                  int OC) override;
  // `out` is not read: the CPU recomputes the probabilities from att's logsumexp and
  // takes sum_j P dP from them.
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* att, int B, int T, int C, int NH,
                          MatmulFormat format) override;
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout,
                          const float* inp, const float* w, const float* mean,
                          const float* rstd, int N, int C) override;
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C) override;

  void vocab_parallel_encoder_forward(float* out, const int32_t* tokens, const float* wte_slice,
                                      const float* wpe, VocabSlice slice, int B, int T,
                                      int C) override;
  void vocab_parallel_encoder_backward(float* dwte_slice, float* dwpe, const float* dout,
                                       const int32_t* tokens, VocabSlice slice, int B, int T,
                                       int C) override;
  void vocab_parallel_logit_max(float* max_slots, const float* logits, VocabSlice slice, int N,
                                int rank, int ranks) override;
  void vocab_parallel_exp_sums(float* logits_to_exps, float* sums_and_targets,
                               const float* max_slots, const int32_t* targets, VocabSlice slice,
                               int N, int ranks) override;
  void vocab_parallel_softmax_loss(float* exps_to_probs, float* losses,
                                   const float* sums_and_targets, int N, int V_local) override;
  void vocab_parallel_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets,
                                             VocabSlice slice, int N, float dloss) override;

  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, size_t n, float factor) override;
  double sum(const float* x, size_t n) override;
  void adamw_given_moment_update(float* params, const float* grads, float* m, const float* v,
                                 size_t n, float beta1, float eps, float clip_scale, float decay,
                                 float step_size, float correction, double cap) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t step,
                    float grad_scale) override;

 private:
  // Per-thread scratch of at least `floats` floats; grows on first use only, so steady
  // state steps allocate nothing.
  float* scratch(int thread, size_t floats);

  template <class Term>
  double reduce_sum(const float* x, size_t n, Term term);

  // Adds one linear layer's GEMMs to counters_: `products` N x C x OC products, started
  // at `start` (a steady_clock time point in seconds).
  static double now_seconds();
  void count_matmul(double start, double products) {
    counters_.seconds += now_seconds() - start;
    counters_.flops += 2.0 * products;
  }

  // The sgemm calls of the matmuls, with the product scaled by alpha (1 in fp32 and bf16,
  // the inverse FP8 scales in fp8) and dbias summed from `bias_dout` (the unquantized
  // output gradient).
  void scaled_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                             int N, int C, int OC, float alpha);
  void scaled_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                              const float* bias_dout, const float* inp, const float* w, int N,
                              int C, int OC, float alpha_dinp, float alpha_dw);
  // cpu_matmul_mixed.cpp: the mixed matmuls by format, without the counting.
  void mixed_forward(float* out, const float* inp, const float* w, const float* bias, int N,
                     int C, int OC, const MatmulPrecision& precision);
  void mixed_backward(float* dinp, float* dw, float* dbias, const float* dout,
                      const float* inp, const float* w, int N, int C, int OC,
                      const MatmulPrecision& precision);
  // cpu_matmul_mixed.cpp: operand `which` quantized to fp8 with its scale (raising its
  // amax), into the operand's scratch; returns the scratch.
  enum Operand { kInput, kWeight, kOutputGrad, kOperands };
  const float* to_fp8(Operand which, const float* x, size_t n, const Fp8OperandScaling& scaling);
  // cpu_matmul_bf16.cpp: the bf16 matmuls through oneDNN, on operands rounded by
  // to_bf16_bits into the operand's bf16 scratch, where the CPU has native bf16
  // (native_bf16_); elsewhere the operands rounded to bf16 values in fp32 (to_bf16) and
  // the fp32 sgemm, which computes the same products.
  const uint16_t* to_bf16_bits(Operand which, const float* x, size_t n);
  const float* to_bf16(Operand which, const float* x, size_t n);
  // The input operand of a bf16 matmul in the form the product takes
  // (bf16_operand_bytes()): from fp32 values, or from bf16 bits (bf16 activations).
  const void* bf16_input_operand(const float* inp, size_t n);
  const void* bf16_input_operand(const uint16_t* inp, size_t n);
  const void* packed_for_row_blocks(GemmShape& shape, const void* b);
  // inp_operand: bf16_input_operand's result.
  void bf16_matmul_forward(float* out, const void* inp_operand, const float* w,
                           const float* bias, int N, int C, int OC);
  void bf16_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                            const void* inp_operand, const float* w, int N, int C, int OC);
  // cpu_attention.cpp (fp32) and cpu_attention_bf16.cpp (bf16 operands).
  void fp32_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                              int NH);
  void fp32_attention_backward(float* dqkv, const float* dout, const float* qkv,
                               const float* att, int B, int T, int C, int NH);
  void bf16_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                              int NH);
  void bf16_attention_backward(float* dqkv, const float* dout, const float* qkv,
                               const float* att, int B, int T, int C, int NH);
  // c (M, N) = a @ b (+ c) on bf16 operands of `shape`'s strides, on pool thread `thread`:
  // oneDNN's bf16 GEMM on bf16 bits where the CPU has native bf16, else the fp32 sgemm on
  // bf16 values kept in fp32 (the same products). a and b point at uint16_t or float
  // accordingly (bf16_operand_bytes()).
  void bf16_product(int thread, const GemmShape& shape, const void* a, const void* b, float* c);
  size_t bf16_operand_bytes() const { return native_bf16_ ? sizeof(uint16_t) : sizeof(float); }

  std::shared_ptr<HostMemory> memory_;  // where allocate() takes its blocks from
  util::ThreadPool pool_;
  std::vector<std::vector<float>> scratch_;
  std::vector<double> partials_;  // one per thread, for the reductions
  std::atomic<size_t> in_use_bytes_{0}, peak_bytes_{0};
  // Rounded (bf16 without native bf16) or quantized (fp8) matmul operands; grown on
  // first use only.
  std::vector<float> operand_scratch_[kOperands];
  std::vector<float> amax_partials_;  // one per thread
  std::vector<uint16_t> bf16_scratch_[kOperands];  // bf16 operands; grown on first use only
  OnednnGemm gemm_;
  bool native_bf16_ = OnednnGemm::native_bf16();
  MatmulCounters counters_;
};

}  // namespace dseek::backend
