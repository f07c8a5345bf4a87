// CudnnAttention (cudnn_attention.hpp): plans for the graphs of attention_graphs.hpp per
// shape, kept; the bf16 copies in and out of them; execution on the backend's stream.
#include "gpu/cudnn/cudnn_attention.hpp"

#include <cudnn_graph.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include "gpu/cuda_check.hpp"
#include "gpu/cudnn/attention_graphs.hpp"
#include "gpu/cudnn/cudnn_graph.hpp"
#include "gpu/precision_convert.hpp"

namespace dseek::gpu {

namespace {

using cudnn::Library;
using cudnn::Plan;
using namespace cudnn;  // the tensors' uids

// A device buffer grown to the largest request and kept.
class Buffer {
 public:
  explicit Buffer(const CudnnAttention::Memory& memory) : memory_(&memory) {}
  ~Buffer() {
    if (data_ != nullptr) memory_->release(data_);
  }
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      if (data_ != nullptr) memory_->release(data_);
      data_ = memory_->allocate(bytes);
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  const CudnnAttention::Memory* memory_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class CudnnAttentionImpl final : public CudnnAttention {
 public:
  CudnnAttentionImpl(const Library& lib, cudaStream_t stream, Memory memory)
      : lib_(lib), stream_(stream), memory_(std::move(memory)) {
    DSEEK_CUDNN_CHECK(lib_, lib_.create(&handle_));
    DSEEK_CUDNN_CHECK(lib_, lib_.set_stream(handle_, stream_));
  }
  ~CudnnAttentionImpl() override {
    plans_.clear();
    if (handle_ != nullptr) lib_.destroy(handle_);
  }

  std::string version() const override {
    const size_t v = lib_.get_version();
    return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }

  bool prepare(int B, int T, int C, int NH, std::string* why_not) override {
    const Key key{B, T, C, NH};
    auto found = plans_.find(key);
    if (found == plans_.end()) found = plans_.emplace(key, build(B, T, C, NH)).first;
    if (!found->second.ok && why_not != nullptr) *why_not = found->second.why_not;
    return found->second.ok;
  }

  void forward(float* out, float* stats, const float* qkv, int B, int T, int C,
               int NH) override {
    Shapes& shapes = ready(B, T, C, NH);
    const size_t rows = static_cast<size_t>(B) * T;
    auto* qkv16 = static_cast<__nv_bfloat16*>(qkv16_.get(rows * 3 * C * sizeof(__nv_bfloat16)));
    auto* out16 = static_cast<__nv_bfloat16*>(out16_.get(rows * C * sizeof(__nv_bfloat16)));
    convert_to_bf16(qkv16, qkv, rows * 3 * C, stream_);
    shapes.forward.execute(handle_,
                           {{kQ, qkv16}, {kK, qkv16 + C}, {kV, qkv16 + 2 * C}, {kO, out16},
                            {kStats, stats}},
                           workspace_.get(static_cast<size_t>(shapes.forward.workspace_bytes())));
    convert_bf16_to_float(out, out16, rows * C, stream_);
  }

  void backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                const float* stats, int B, int T, int C, int NH) override {
    Shapes& shapes = ready(B, T, C, NH);
    const size_t rows = static_cast<size_t>(B) * T;
    const size_t bf16 = sizeof(__nv_bfloat16);
    auto* qkv16 = static_cast<__nv_bfloat16*>(qkv16_.get(rows * 3 * C * bf16));
    auto* out16 = static_cast<__nv_bfloat16*>(out16_.get(rows * C * bf16));
    auto* dout16 = static_cast<__nv_bfloat16*>(dout16_.get(rows * C * bf16));
    auto* dqkv16 = static_cast<__nv_bfloat16*>(dqkv16_.get(rows * 3 * C * bf16));
    auto* softmax_sum = rows_.get(static_cast<size_t>(B) * NH * T * sizeof(float));
    convert_to_bf16(qkv16, qkv, rows * 3 * C, stream_);
    convert_to_bf16(out16, out, rows * C, stream_);
    convert_to_bf16(dout16, dout, rows * C, stream_);
    std::map<int64_t, void*> bound{{kQ, qkv16},          {kK, qkv16 + C},
                                   {kV, qkv16 + 2 * C},  {kO, out16},
                                   {kDO, dout16},        {kStats, const_cast<float*>(stats)},
                                   {kSoftmaxSum, softmax_sum},
                                   {kDQ, dqkv16},        {kDK, dqkv16 + C},
                                   {kDV, dqkv16 + 2 * C}};
    if (!shapes.deterministic) {
      const size_t accum_bytes = rows * C * sizeof(float);
      void* accum = dq_accum_.get(accum_bytes);
      DSEEK_CUDA_CHECK(cudaMemsetAsync(accum, 0, accum_bytes, stream_));
      bound[kDQAccum] = accum;
    }
    shapes.backward.execute(handle_, bound,
                            workspace_.get(static_cast<size_t>(shapes.backward.workspace_bytes())));
    convert_bf16_to_float(dqkv, dqkv16, rows * 3 * C, stream_);
  }

 private:
  using Key = std::tuple<int, int, int, int>;
  struct Shapes {
    bool ok = false;
    std::string why_not;
    bool deterministic = true;
    Plan forward;
    Plan backward;
  };

  Shapes& ready(int B, int T, int C, int NH) {
    std::string why_not;
    if (!prepare(B, T, C, NH, &why_not))
      throw std::logic_error("CudnnAttention used for a shape it refused: " + why_not);
    return plans_.at(Key{B, T, C, NH});
  }

  Shapes build(int B, int T, int C, int NH) {
    Shapes shapes;
    const std::string what = "cuDNN attention B=" + std::to_string(B) + " T=" +
                             std::to_string(T) + " C=" + std::to_string(C) + " NH=" +
                             std::to_string(NH);
    if (NH < 1 || C % NH != 0 || (C / NH) % 8 != 0 || C / NH > kMaxFusedHeadSize) {
      shapes.why_not = what + ": cuDNN's fused attention needs a head size that is a multiple "
                              "of 8 and at most " + std::to_string(kMaxFusedHeadSize);
      return shapes;
    }
    // cuDNN before 9.10 wanted the lowest float for masked scores, later -infinity.
    const float negative_infinity = lib_.get_version() < 91000
                                        ? std::numeric_limits<float>::lowest()
                                        : -std::numeric_limits<float>::infinity();
    try {
      shapes.forward = cudnn::attention_forward_graph(lib_, B, T, C, NH, negative_infinity)
                           ->build(handle_, what + " forward");
      try {
        shapes.backward =
            cudnn::attention_backward_graph(lib_, B, T, C, NH, negative_infinity, true)
                ->build(handle_, what + " backward");
      } catch (const std::exception& deterministic_failure) {
        // The atomics variant (dQ accumulated in fp32): not bitwise repeatable.
        shapes.backward =
            cudnn::attention_backward_graph(lib_, B, T, C, NH, negative_infinity, false)
                ->build(handle_, what + " backward (dQ accumulated)");
        shapes.deterministic = false;
        std::fprintf(stderr,
                     "dseek: %s: the deterministic backward has no engine (%s); the dQ-"
                     "accumulating one runs, whose gradients may differ in the last bits from "
                     "run to run\n",
                     what.c_str(), deterministic_failure.what());
      }
      shapes.ok = true;
    } catch (const std::exception& error) {
      shapes.why_not = error.what();
    }
    return shapes;
  }

  const Library& lib_;
  cudaStream_t stream_;
  Memory memory_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Key, Shapes> plans_;
  Buffer qkv16_{memory_}, out16_{memory_}, dout16_{memory_}, dqkv16_{memory_};
  Buffer rows_{memory_}, dq_accum_{memory_}, workspace_{memory_};
};

}  // namespace

std::unique_ptr<CudnnAttention> CudnnAttention::create(cudaStream_t stream, Memory memory,
                                                       std::string* why_not) {
  const Library* lib = cudnn::library(why_not);
  if (lib == nullptr) return nullptr;
  try {
    return std::make_unique<CudnnAttentionImpl>(*lib, stream, std::move(memory));
  } catch (const std::exception& error) {  // e.g. cudnnCreate without a usable GPU
    if (why_not != nullptr) *why_not = error.what();
    return nullptr;
  }
}

}  // namespace dseek::gpu
