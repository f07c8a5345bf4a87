// CudaBackend: the backend interface (runtime/backend/backend.hpp) on one CUDA device.
// This file holds the class, its memory and the dispatch to the kernels; the kernels
// are in gpu/kernels/, one file per op family.
//
// Everything runs in order on one stream the backend owns (cuBLAS included), so a block
// released to the pool and handed out again is only touched after the work queued
// before it. Calls that return data to the host (copy_to_host, sum, sum_squares)
// synchronise the stream; copy_from_host does too, so the caller may reuse its host
// buffer at once. copy_from_host_async is the exception: it runs on a second stream (the
// copy stream) beside the compute, behind an event the compute stream waits for, so
// the CPU offload's updated parameters go back while kernels of earlier layers run; its
// host source is pinned memory from host_memory() (pinned_host_memory.hpp). Each call first makes the backend's device current on the calling
// thread, so the backend may be driven from any (one at a time) thread.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "gpu/cuda_backend.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/cuda_mixed_matmul.hpp"
#include "gpu/cudnn/cudnn_attention.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_pool.hpp"
#include "gpu/kernels/kernels.hpp"
#include "gpu/pinned_host_memory.hpp"

namespace dseek::gpu {

namespace {

using backend::MemoryUsage;

std::string device_label(int index, const std::string& name) {
  return "CUDA device " + std::to_string(index) + " (" + name + ")";
}

// Checks the index against the devices this process sees, and names the device.
std::string validate_device(int device_index) {
  DeviceQuery query = query_devices();
  if (!query.error.empty())
    throw std::runtime_error("make_cuda_backend(" + std::to_string(device_index) +
                             "): no usable CUDA device: " + query.error);
  if (device_index < 0 || device_index >= static_cast<int>(query.devices.size()))
    throw std::invalid_argument("make_cuda_backend(" + std::to_string(device_index) +
                                "): this process sees " + std::to_string(query.devices.size()) +
                                " CUDA device(s), indices 0.." +
                                std::to_string(static_cast<int>(query.devices.size()) - 1));
  const DeviceInfo& info = query.devices[static_cast<size_t>(device_index)];
  if (info.compute_major < 8)
    throw std::runtime_error(device_label(device_index, info.name) + " has compute capability " +
                             std::to_string(info.compute_major) + "." +
                             std::to_string(info.compute_minor) +
                             "; dseek's CUDA kernels are built for sm_80 and sm_90");
  return device_label(device_index, info.name);
}

// Which kernels run bf16 attention: DSEEK_CUDA_ATTENTION=auto (the default: cuDNN's
// fused attention where it is available and takes the shape, else the tiled kernels),
// cudnn (cuDNN or an error saying why not: the check script's way to be sure) or tiled.
// fp32 attention always runs the tiled kernels (cuDNN's fused kernels take bf16).
enum class AttentionKernels { automatic, cudnn, tiled };

AttentionKernels attention_kernels_from_environment() {
  const char* value = std::getenv("DSEEK_CUDA_ATTENTION");
  if (value == nullptr || std::string(value).empty() || std::string(value) == "auto")
    return AttentionKernels::automatic;
  if (std::string(value) == "cudnn") return AttentionKernels::cudnn;
  if (std::string(value) == "tiled") return AttentionKernels::tiled;
  throw std::invalid_argument(std::string("DSEEK_CUDA_ATTENTION=") + value +
                              ": expected auto, cudnn or tiled");
}

class CudaBackend final : public backend::Backend {
 public:
  CudaBackend(int device, std::string label)
      : device_(device), label_(label), pool_(device, label) {
    make_current();
    DSEEK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DSEEK_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    // Ordering only: no timing, so recording and waiting cost nothing extra.
    DSEEK_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    DSEEK_CUDA_CHECK(cudaEventCreateWithFlags(&compute_reached_, cudaEventDisableTiming));
    host_memory_ = pinned_host_memory(device_);
    DSEEK_CUBLAS_CHECK(cublasCreate(&cublas_));
    DSEEK_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // fp32 parity with the CPU: no TF32 tensor-core math (CUBLAS_DEFAULT_MATH never
    // uses it; set explicitly so a changed library default cannot switch it on).
    DSEEK_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    reduction_partials_ = static_cast<double*>(pool_.allocate(
        sizeof(double) * static_cast<size_t>(std::max(kernels::reduction_partials() + 1,
                                                      kernels::given_moment_partials()))));
    mixed_ = std::make_unique<CudaMixedMatmul>(
        device_, stream_, label_,
        [this](size_t bytes) {
          std::lock_guard<std::mutex> lock(pool_mutex_);
          return pool_.allocate(bytes);
        },
        [this](void* pointer) {
          std::lock_guard<std::mutex> lock(pool_mutex_);
          pool_.release(pointer);
        });
    if (attention_kernels_ != AttentionKernels::tiled) {
      cudnn_attention_ = CudnnAttention::create(
          stream_,
          {[this](size_t bytes) {
             std::lock_guard<std::mutex> lock(pool_mutex_);
             return pool_.allocate(bytes);
           },
           [this](void* pointer) {
             std::lock_guard<std::mutex> lock(pool_mutex_);
             pool_.release(pointer);
           }},
          &cudnn_unavailable_);
      if (cudnn_attention_ == nullptr && attention_kernels_ == AttentionKernels::cudnn)
        throw std::runtime_error(label_ + ": DSEEK_CUDA_ATTENTION=cudnn, but " +
                                 cudnn_unavailable_);
    }
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    cudaEventDestroy(copied_);
    cudaEventDestroy(compute_reached_);
    cudaStreamDestroy(copy_stream_);
    cudnn_attention_.reset();  // its buffers go back to pool_
    mixed_.reset();  // its scratch goes back to pool_, its cuBLASLt handle away
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
    // pool_ frees its chunks in its own destructor.
  }

  std::string name() const override { return "cuda"; }

  // --- memory ---------------------------------------------------------------------
  void* allocate(size_t bytes) override {
    make_current();
    std::lock_guard<std::mutex> lock(pool_mutex_);
    void* pointer = pool_.allocate(bytes);
    DSEEK_CUDA_CHECK(cudaMemsetAsync(pointer, 0, bytes, stream_));
    return pointer;
  }
  void release(void* pointer) override {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    pool_.release(pointer);
  }
  MemoryUsage memory_usage() const override {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    return {pool_.in_use_bytes(), pool_.peak_bytes()};
  }
  void zero(float* x, size_t n) override {
    make_current();
    DSEEK_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
  }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    make_current();
    DSEEK_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    make_current();
    DSEEK_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    make_current();
    DSEEK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  std::shared_ptr<backend::HostMemory> host_memory() const override { return host_memory_; }
  void copy_from_host_async(void* dst, const void* host_src, size_t bytes) override {
    make_current();
    // The copy may overwrite what kernels queued before it still read: it starts only
    // where the compute stream is now ...
    DSEEK_CUDA_CHECK(cudaEventRecord(compute_reached_, stream_));
    DSEEK_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, compute_reached_, 0));
    DSEEK_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, copy_stream_));
    // ... and every kernel queued after it waits for it (on the device: the host goes on).
    // Re-recording the event later is fine: a wait takes the record current at the call.
    DSEEK_CUDA_CHECK(cudaEventRecord(copied_, copy_stream_));
    DSEEK_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied_, 0));
  }
  void finish_compute() override {
    make_current();
    synchronize();
  }
  void finish_copies() override {
    make_current();
    cudaError_t status = cudaStreamSynchronize(copy_stream_);
    if (status != cudaSuccess)
      throw std::runtime_error(label_ + ": " + cudaGetErrorName(status) + ": " +
                               cudaGetErrorString(status) + " (reported by the copy stream)");
  }

  // --- forward ----------------------------------------------------------------------
  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) override {
    make_current();
    kernels::encoder_forward(stream_, out, tokens, wte, wpe, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int N, int C) override {
    make_current();
    kernels::layernorm_forward(stream_, out, mean, rstd, inp, w, b, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N,
                      int C, int OC) override {
    make_current();
    kernels::matmul_forward(cublas_, stream_, out, inp, w, bias, N, C, OC);
  }
  size_t attention_state_floats(int B, int T, int C, int NH) const override {
    return kernels::attention_state_floats(B, T, NH);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                         backend::MatmulFormat format) override {
    make_current();
    if (fused_attention(format, B, T, C, NH))
      return cudnn_attention_->forward(out, att, qkv, B, T, C, NH);
    check_heads(C, NH);
    kernels::attention_forward(stream_, out, att, qkv, B, T, C, NH, attention_in_bf16(format));
  }
  void gelu_forward(float* out, const float* inp, size_t n) override {
    make_current();
    kernels::gelu_forward(stream_, out, inp, n);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) override {
    make_current();
    kernels::residual_forward(stream_, out, a, b, n);
  }
  void softmax_cross_entropy_forward(float* logits_to_probs, float* losses,
                                     const int32_t* targets, int N, int V) override {
    make_current();
    kernels::softmax_cross_entropy_forward(stream_, logits_to_probs, losses, targets, N, V);
  }

  // --- backward ---------------------------------------------------------------------
  void softmax_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets, int N,
                                      int V, float dloss) override {
    make_current();
    kernels::softmax_cross_entropy_backward(stream_, probs_to_dlogits, targets, N, V, dloss);
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                       const float* w, int N, int C, int OC) override {
    make_current();
    // Only the bias gradient uses scratch; the tied output head (no bias, OC = the
    // vocabulary) would otherwise grow it to (N / 64) * V floats, 51 MB for GPT-2.
    const kernels::Scratch bias_scratch =
        dbias != nullptr ? scratch(kernels::matmul_backward_scratch_floats(N, OC))
                         : kernels::Scratch{};
    kernels::matmul_backward(cublas_, stream_, bias_scratch, dinp, dw, dbias, dout, inp, w, N, C,
                             OC);
  }
  // bf16 / fp8 through cuBLASLt (cuda_mixed_matmul.hpp); fp32 stays on the sgemm path.
  void mixed_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                            int N, int C, int OC,
                            const backend::MatmulPrecision& precision) override {
    if (precision.format == backend::MatmulFormat::fp32)
      return matmul_forward(out, inp, w, bias, N, C, OC);
    make_current();
    mixed_->forward(out, inp, w, bias, N, C, OC, precision);
  }
  void mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                             const float* inp, const float* w, int N, int C, int OC,
                             const backend::MatmulPrecision& precision) override {
    if (precision.format == backend::MatmulFormat::fp32)
      return matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC);
    make_current();
    mixed_->backward(dinp, dw, dout, inp, w, N, C, OC, precision);
    // The bias gradient from the unquantized dout, as the CPU reference takes it.
    if (dbias != nullptr)
      kernels::add_column_sums(stream_, scratch(kernels::column_sums_scratch_floats(N, OC)),
                               dbias, dout, N, OC);
  }
  // bf16 activations: the producers write bf16 bits, the matmuls read them without a cast.
  void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                              const float* w, const float* b, int N, int C) override {
    make_current();
    kernels::layernorm_forward(stream_, out, mean, rstd, inp, w, b, N, C);
  }
  void gelu_forward_bf16(uint16_t* out, const float* inp, size_t n) override {
    make_current();
    kernels::gelu_forward(stream_, out, inp, n);
  }
  void bf16_input_matmul_forward(float* out, const uint16_t* inp, const float* w,
                                 const float* bias, int N, int C, int OC) override {
    make_current();
    mixed_->bf16_forward(out, reinterpret_cast<const __nv_bfloat16*>(inp), w, bias, N, C, OC);
  }
  void bf16_input_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                  const uint16_t* inp, const float* w, int N, int C,
                                  int OC) override {
    make_current();
    mixed_->bf16_backward(dinp, dw, dout, reinterpret_cast<const __nv_bfloat16*>(inp), w, N, C,
                          OC);
    if (dbias != nullptr)  // from the unrounded dout, as mixed_matmul_backward
      kernels::add_column_sums(stream_, scratch(kernels::column_sums_scratch_floats(N, OC)),
                               dbias, dout, N, OC);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    make_current();
    kernels::gelu_backward(stream_, dinp, inp, dout, n);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* att, int B, int T, int C, int NH,
                          backend::MatmulFormat format) override {
    make_current();
    if (fused_attention(format, B, T, C, NH))
      return cudnn_attention_->backward(dqkv, dout, qkv, out, att, B, T, C, NH);
    check_heads(C, NH);
    kernels::attention_backward(stream_,
                                scratch(kernels::attention_backward_scratch_floats(B, T, NH)),
                                dqkv, dout, qkv, out, att, B, T, C, NH, attention_in_bf16(format));
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    make_current();
    kernels::layernorm_backward(stream_, scratch(kernels::layernorm_backward_scratch_floats(N, C)),
                                dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C) override {
    make_current();
    kernels::encoder_backward(stream_, dwte, dwpe, dout, tokens, B, T, C);
  }

  // --- vocabulary-parallel embedding and cross-entropy --------------------------------
  void vocab_parallel_encoder_forward(float* out, const int32_t* tokens, const float* wte_slice,
                                      const float* wpe, backend::VocabSlice slice, int B, int T,
                                      int C) override {
    make_current();
    kernels::vocab_parallel_encoder_forward(stream_, out, tokens, wte_slice, wpe, slice.begin,
                                            slice.rows, B, T, C);
  }
  void vocab_parallel_encoder_backward(float* dwte_slice, float* dwpe, const float* dout,
                                       const int32_t* tokens, backend::VocabSlice slice, int B,
                                       int T, int C) override {
    make_current();
    kernels::vocab_parallel_encoder_backward(stream_, dwte_slice, dwpe, dout, tokens, slice.begin,
                                             slice.rows, B, T, C);
  }
  void vocab_parallel_logit_max(float* max_slots, const float* logits, backend::VocabSlice slice,
                                int N, int rank, int ranks) override {
    make_current();
    kernels::vocab_parallel_logit_max(stream_, max_slots, logits, N, slice.rows, slice.real_rows(),
                                      rank, ranks);
  }
  void vocab_parallel_exp_sums(float* logits_to_exps, float* sums_and_targets,
                               const float* max_slots, const int32_t* targets,
                               backend::VocabSlice slice, int N, int ranks) override {
    make_current();
    kernels::vocab_parallel_exp_sums(stream_, logits_to_exps, sums_and_targets, max_slots, targets,
                                     slice.begin, slice.rows, slice.real_rows(), N, ranks);
  }
  void vocab_parallel_softmax_loss(float* exps_to_probs, float* losses,
                                   const float* sums_and_targets, int N, int V_local) override {
    make_current();
    kernels::vocab_parallel_softmax_loss(stream_, exps_to_probs, losses, sums_and_targets, N,
                                         V_local);
  }
  void vocab_parallel_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets,
                                             backend::VocabSlice slice, int N,
                                             float dloss) override {
    make_current();
    kernels::vocab_parallel_cross_entropy_backward(stream_, probs_to_dlogits, targets, slice.begin,
                                                   slice.rows, N, dloss);
  }

  // --- optimizer and reductions --------------------------------------------------------
  double sum_squares(const float* x, size_t n) override { return reduce(x, n, true); }
  double sum(const float* x, size_t n) override { return reduce(x, n, false); }
  void scale(float* x, size_t n, float factor) override {
    make_current();
    kernels::scale(stream_, x, n, factor);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t step,
                    float grad_scale) override {
    make_current();
    kernels::adamw_update(stream_, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                          step, grad_scale);
  }
  void adamw_given_moment_update(float* params, const float* grads, float* m, const float* v,
                                 size_t n, float beta1, float eps, float clip_scale, float decay,
                                 float step_size, float correction, double cap) override {
    make_current();
    // The reductions' partials serve as its scratch: both run on stream_, in order.
    kernels::adamw_given_moment_update(stream_, reduction_partials_, params, grads, m, v, n, beta1,
                                       eps, clip_scale, decay, step_size, correction, cap);
  }

 private:
  void make_current() { DSEEK_CUDA_CHECK(cudaSetDevice(device_)); }

  // Synchronises the stream; an error from an earlier kernel surfaces here, so it is
  // reported with the device's name.
  void synchronize() {
    cudaError_t status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess)
      throw std::runtime_error(label_ + ": " + cudaGetErrorName(status) + ": " +
                               cudaGetErrorString(status) +
                               " (reported at a stream synchronisation)");
  }

  void check_heads(int C, int NH) const {
    if (NH < 1 || C % NH != 0 || C / NH > kernels::kMaxHeadSize)
      throw std::invalid_argument(label_ + ": attention with C = " + std::to_string(C) +
                                  " and NH = " + std::to_string(NH) +
                                  ": the CUDA kernels need C divisible by NH and a head size "
                                  "of at most " + std::to_string(kernels::kMaxHeadSize));
  }

  // Attention's products on bf16 operands (bf16) or fp32; it has no fp8 form.
  bool attention_in_bf16(backend::MatmulFormat format) const {
    if (format == backend::MatmulFormat::fp8)
      throw std::invalid_argument(label_ + ": attention has no fp8 form: fp32 or bf16");
    return format == backend::MatmulFormat::bf16;
  }

  // Whether this attention runs through cuDNN (attention_kernels_from_environment). The
  // answer for a shape is the same in forward and backward (CudnnAttention::prepare keeps
  // it), so a backward always reads the state its own forward wrote. Under auto, the first
  // refusal of each shape is said once on stderr; under cudnn it is an error.
  bool fused_attention(backend::MatmulFormat format, int B, int T, int C, int NH) {
    if (!attention_in_bf16(format) || attention_kernels_ == AttentionKernels::tiled) return false;
    std::string why_not = cudnn_unavailable_;
    const bool fused = cudnn_attention_ != nullptr &&
                       cudnn_attention_->prepare(B, T, C, NH, &why_not);
    if (!fused && attention_kernels_ == AttentionKernels::cudnn)
      throw std::runtime_error(label_ + ": DSEEK_CUDA_ATTENTION=cudnn, but " + why_not);
    const std::string said = fused ? cudnn_attention_->version() : why_not;
    if (said_.insert(said).second) {
      if (fused)
        std::fprintf(stderr, "dseek: %s: bf16 attention through %s (fused flash attention)\n",
                     label_.c_str(), said.c_str());
      else
        std::fprintf(stderr, "dseek: %s: bf16 attention on the tiled kernels: %s\n",
                     label_.c_str(), said.c_str());
    }
    return fused;
  }

  // Kernel scratch, grown to the largest request and then kept: a steady-state step
  // allocates nothing. Growing while earlier kernels may still read the old block is
  // safe: the pool hands memory out again only in stream order.
  kernels::Scratch scratch(size_t floats) {
    if (floats > scratch_.floats) {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      if (scratch_.data != nullptr) pool_.release(scratch_.data);
      scratch_.data = static_cast<float*>(pool_.allocate(floats * sizeof(float)));
      scratch_.floats = floats;
    }
    return scratch_;
  }

  double reduce(const float* x, size_t n, bool squares) {
    make_current();
    double* result = reduction_partials_ + kernels::reduction_partials();
    kernels::sum(stream_, reduction_partials_, result, x, n, squares);
    double host = 0.0;
    DSEEK_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, stream_));
    synchronize();
    return host;
  }

  int device_;
  std::string label_;
  mutable std::mutex pool_mutex_;  // DeviceBuffers may be destroyed on another thread
  DevicePool pool_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;       // copy_from_host_async
  cudaEvent_t copied_ = nullptr;             // the last async copy, on copy_stream_
  cudaEvent_t compute_reached_ = nullptr;    // stream_ where an async copy was queued
  std::shared_ptr<backend::HostMemory> host_memory_;  // pinned
  cublasHandle_t cublas_ = nullptr;
  // reduction_partials() + 1 (the result) doubles, or given_moment_partials() if more
  double* reduction_partials_ = nullptr;
  kernels::Scratch scratch_;
  std::unique_ptr<CudaMixedMatmul> mixed_;  // released before pool_ (declared after it)
  AttentionKernels attention_kernels_ = attention_kernels_from_environment();
  std::unique_ptr<CudnnAttention> cudnn_attention_;  // null: tiled kernels only
  std::string cudnn_unavailable_;                    // why cudnn_attention_ is null
  std::set<std::string> said_;                       // attention paths told on stderr
};

}  // namespace

std::unique_ptr<backend::Backend> make_cuda_backend(int device_index) {
  std::string label = validate_device(device_index);
  return std::make_unique<CudaBackend>(device_index, std::move(label));
}

}  // namespace dseek::gpu
