// Implementation of scrambled_backend.hpp. Each op stages the WHOLE allocations its
// pointers fall in (decoded into host scratch), runs the CPU op on the scratch, and
// encodes back the allocations it was given as outputs. Staging whole allocations needs
// no shape arithmetic per op and handles aliasing (dinp == dout) and several outputs in
// one buffer (dw and dbias in the gradient buffer) for free; it costs a copy of each
// touched buffer per op, which a test device can afford on the tiny test models. The
// memory calls count what they move (take_host_traffic): the traffic of a real device.
#include "runtime/backend/scrambled_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dseek::backend {

namespace {

constexpr unsigned char kMask = 0xA5;

// XOR is its own inverse: the same call encodes and decodes.
void flip(void* data, size_t bytes) {
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) p[i] ^= kMask;
}

class ScrambledBackend;
class Staging;
MatmulPrecision staged(Staging& s, const MatmulPrecision& precision);

// Host scratch copies of the allocations one op touches; outputs are encoded back into
// backend memory when the op is done (the destructor).
class Staging {
 public:
  explicit Staging(const ScrambledBackend& backend) : backend_(backend) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging();

  template <class T>
  const T* in(const T* device) {
    return static_cast<const T*>(host(device, false));
  }
  template <class T>
  T* out(T* device) {
    return static_cast<T*>(host(device, true));
  }

 private:
  struct Block {
    char* device = nullptr;
    size_t bytes = 0;
    char* host = nullptr;  // malloc'ed: holds floats or ints alike
    bool written = false;
  };
  void* host(const void* device, bool written);

  const ScrambledBackend& backend_;
  std::vector<Block> blocks_;
};

class ScrambledBackend final : public Backend {
 public:
  explicit ScrambledBackend(int threads) : cpu_(make_cpu_backend(threads)) {}
  std::string name() const override { return kScrambledDevice; }

  // The allocation that holds `device` (its base and size); std::logic_error for a
  // pointer that is not this backend's memory, such as a host array passed to an op.
  std::pair<char*, size_t> block_of(const void* device) const {
    std::lock_guard lock(mutex_);
    const auto address = reinterpret_cast<uintptr_t>(device);
    auto it = blocks_.upper_bound(address);
    if (it != blocks_.begin()) {
      --it;
      if (address <= it->first + it->second)
        return {reinterpret_cast<char*>(it->first), it->second};
    }
    throw std::logic_error("scrambled backend: an op was given a pointer that is not memory of "
                           "this backend (host memory passed where backend memory belongs)");
  }

  void* allocate(size_t bytes) override {
    void* p = cpu_->allocate(bytes);
    std::memset(p, kMask, bytes);  // zero-filled, encoded
    std::lock_guard lock(mutex_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void release(void* pointer) override {
    if (pointer == nullptr) return;
    {
      std::lock_guard lock(mutex_);
      blocks_.erase(reinterpret_cast<uintptr_t>(pointer));
    }
    cpu_->release(pointer);
  }
  void zero(float* x, size_t n) override { std::memset(x, kMask, n * sizeof(float)); }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    std::memcpy(dst, host_src, bytes);
    flip(dst, bytes);
    count(traffic_.from_host, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    std::memcpy(host_dst, src, bytes);
    flip(host_dst, bytes);
    count(traffic_.to_host, bytes);
  }
  // Both sides hold the same mask: the encoded bytes move as they are (no host traffic).
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  HostTraffic take_traffic() {
    std::lock_guard lock(mutex_);
    return std::exchange(traffic_, HostTraffic{});
  }
  MemoryUsage memory_usage() const override { return cpu_->memory_usage(); }

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) override {
    Staging s(*this);
    cpu_->encoder_forward(s.out(out), s.in(tokens), s.in(wte), s.in(wpe), B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* w, const float* b, int N, int C) override {
    Staging s(*this);
    cpu_->layernorm_forward(s.out(out), s.out(mean), s.out(rstd), s.in(inp), s.in(w), s.in(b), N,
                            C);
  }
  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N,
                      int C, int OC) override {
    Staging s(*this);
    cpu_->matmul_forward(s.out(out), s.in(inp), s.in(w), s.in(bias), N, C, OC);
  }
  void mixed_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                            int N, int C, int OC, const MatmulPrecision& precision) override {
    Staging s(*this);
    cpu_->mixed_matmul_forward(s.out(out), s.in(inp), s.in(w), s.in(bias), N, C, OC,
                               staged(s, precision));
  }
  void mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                             const float* inp, const float* w, int N, int C, int OC,
                             const MatmulPrecision& precision) override {
    Staging s(*this);
    cpu_->mixed_matmul_backward(s.out(dinp), s.out(dw), s.out(dbias), s.in(dout), s.in(inp),
                                s.in(w), N, C, OC, staged(s, precision));
  }
  void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                              const float* w, const float* b, int N, int C) override {
    Staging s(*this);
    cpu_->layernorm_forward_bf16(s.out(out), s.out(mean), s.out(rstd), s.in(inp), s.in(w),
                                 s.in(b), N, C);
  }
  void gelu_forward_bf16(uint16_t* out, const float* inp, size_t n) override {
    Staging s(*this);
    cpu_->gelu_forward_bf16(s.out(out), s.in(inp), n);
  }
  void bf16_input_matmul_forward(float* out, const uint16_t* inp, const float* w,
                                 const float* bias, int N, int C, int OC) override {
    Staging s(*this);
    cpu_->bf16_input_matmul_forward(s.out(out), s.in(inp), s.in(w), s.in(bias), N, C, OC);
  }
  void bf16_input_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                  const uint16_t* inp, const float* w, int N, int C,
                                  int OC) override {
    Staging s(*this);
    cpu_->bf16_input_matmul_backward(s.out(dinp), s.out(dw), s.out(dbias), s.in(dout),
                                     s.in(inp), s.in(w), N, C, OC);
  }
  size_t attention_state_floats(int B, int T, int C, int NH) const override {
    return cpu_->attention_state_floats(B, T, C, NH);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH, MatmulFormat format) override {
    Staging s(*this);
    cpu_->attention_forward(s.out(out), s.out(att), s.in(qkv), B, T, C, NH, format);
  }
  void gelu_forward(float* out, const float* inp, size_t n) override {
    Staging s(*this);
    cpu_->gelu_forward(s.out(out), s.in(inp), n);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) override {
    Staging s(*this);
    cpu_->residual_forward(s.out(out), s.in(a), s.in(b), n);
  }
  void softmax_cross_entropy_forward(float* logits_to_probs, float* losses,
                                     const int32_t* targets, int N, int V) override {
    Staging s(*this);
    cpu_->softmax_cross_entropy_forward(s.out(logits_to_probs), s.out(losses), s.in(targets), N,
                                        V);
  }
  void softmax_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets, int N,
                                      int V, float dloss) override {
    Staging s(*this);
    cpu_->softmax_cross_entropy_backward(s.out(probs_to_dlogits), s.in(targets), N, V, dloss);
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                       const float* inp, const float* w, int N, int C, int OC) override {
    Staging s(*this);
    cpu_->matmul_backward(s.out(dinp), s.out(dw), s.out(dbias), s.in(dout), s.in(inp), s.in(w), N,
                          C, OC);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    Staging s(*this);
    cpu_->gelu_backward(s.out(dinp), s.in(inp), s.in(dout), n);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* att, int B, int T, int C, int NH,
                          MatmulFormat format) override {
    Staging s(*this);
    cpu_->attention_backward(s.out(dqkv), s.in(dout), s.in(qkv), s.in(out), s.in(att), B, T, C,
                             NH, format);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout,
                          const float* inp, const float* w, const float* mean,
                          const float* rstd, int N, int C) override {
    Staging s(*this);
    cpu_->layernorm_backward(s.out(dinp), s.out(dw), s.out(db), s.in(dout), s.in(inp), s.in(w),
                             s.in(mean), s.in(rstd), N, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C) override {
    Staging s(*this);
    cpu_->encoder_backward(s.out(dwte), s.out(dwpe), s.in(dout), s.in(tokens), B, T, C);
  }
  void vocab_parallel_encoder_forward(float* out, const int32_t* tokens, const float* wte_slice,
                                      const float* wpe, VocabSlice slice, int B, int T,
                                      int C) override {
    Staging s(*this);
    cpu_->vocab_parallel_encoder_forward(s.out(out), s.in(tokens), s.in(wte_slice), s.in(wpe),
                                         slice, B, T, C);
  }
  void vocab_parallel_encoder_backward(float* dwte_slice, float* dwpe, const float* dout,
                                       const int32_t* tokens, VocabSlice slice, int B, int T,
                                       int C) override {
    Staging s(*this);
    cpu_->vocab_parallel_encoder_backward(s.out(dwte_slice), s.out(dwpe), s.in(dout),
                                          s.in(tokens), slice, B, T, C);
  }
  void vocab_parallel_logit_max(float* max_slots, const float* logits, VocabSlice slice, int N,
                                int rank, int ranks) override {
    Staging s(*this);
    cpu_->vocab_parallel_logit_max(s.out(max_slots), s.in(logits), slice, N, rank, ranks);
  }
  void vocab_parallel_exp_sums(float* logits_to_exps, float* sums_and_targets,
                               const float* max_slots, const int32_t* targets, VocabSlice slice,
                               int N, int ranks) override {
    Staging s(*this);
    cpu_->vocab_parallel_exp_sums(s.out(logits_to_exps), s.out(sums_and_targets), s.in(max_slots),
                                  s.in(targets), slice, N, ranks);
  }
  void vocab_parallel_softmax_loss(float* exps_to_probs, float* losses,
                                   const float* sums_and_targets, int N, int V_local) override {
    Staging s(*this);
    cpu_->vocab_parallel_softmax_loss(s.out(exps_to_probs), s.out(losses), s.in(sums_and_targets),
                                      N, V_local);
  }
  void vocab_parallel_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets,
                                             VocabSlice slice, int N, float dloss) override {
    Staging s(*this);
    cpu_->vocab_parallel_cross_entropy_backward(s.out(probs_to_dlogits), s.in(targets), slice, N,
                                                dloss);
  }
  double sum_squares(const float* x, size_t n) override {
    Staging s(*this);
    return cpu_->sum_squares(s.in(x), n);
  }
  double sum(const float* x, size_t n) override {
    Staging s(*this);
    return cpu_->sum(s.in(x), n);
  }
  void scale(float* x, size_t n, float factor) override {
    Staging s(*this);
    cpu_->scale(s.out(x), n, factor);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t step,
                    float grad_scale) override {
    Staging s(*this);
    cpu_->adamw_update(s.out(params), s.in(grads), s.out(m), s.out(v), n, lr, beta1, beta2, eps,
                       weight_decay, step, grad_scale);
  }
  void adamw_given_moment_update(float* params, const float* grads, float* m, const float* v,
                                 size_t n, float beta1, float eps, float clip_scale, float decay,
                                 float step_size, float correction, double cap) override {
    Staging s(*this);
    cpu_->adamw_given_moment_update(s.out(params), s.in(grads), s.out(m), s.in(v), n, beta1, eps,
                                    clip_scale, decay, step_size, correction, cap);
  }

 private:
  void count(HostTraffic::Direction& direction, size_t bytes) {
    std::lock_guard lock(mutex_);
    ++direction.copies;
    direction.bytes += bytes;
    direction.largest_copy_bytes = std::max(direction.largest_copy_bytes, bytes);
  }

  std::unique_ptr<Backend> cpu_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;  // base address -> bytes, of live allocations
  HostTraffic traffic_;                 // since the last take_traffic()
};

// The FP8 scales (read) and amaxes (raised) of a mixed matmul are backend memory too.
MatmulPrecision staged(Staging& s, const MatmulPrecision& precision) {
  MatmulPrecision host = precision;
  for (Fp8OperandScaling* operand : {&host.inp, &host.weight, &host.dout}) {
    operand->scale = s.in(operand->scale);
    operand->amax = s.out(operand->amax);
  }
  return host;
}

void* Staging::host(const void* device, bool written) {
  if (device == nullptr) return nullptr;
  const auto [base, bytes] = backend_.block_of(device);
  const size_t offset = static_cast<size_t>(static_cast<const char*>(device) - base);
  for (Block& block : blocks_) {
    if (block.device != base) continue;
    block.written = block.written || written;
    return block.host + offset;
  }
  // At least one byte, so an empty allocation still has a distinct scratch address.
  char* host = static_cast<char*>(std::malloc(bytes == 0 ? 1 : bytes));
  if (host == nullptr) throw std::bad_alloc();
  std::memcpy(host, base, bytes);
  flip(host, bytes);
  blocks_.push_back(Block{base, bytes, host, written});
  return host + offset;
}

Staging::~Staging() {
  for (Block& block : blocks_) {
    if (block.written) {
      flip(block.host, block.bytes);
      std::memcpy(block.device, block.host, block.bytes);
    }
    std::free(block.host);
  }
}

}  // namespace

std::unique_ptr<Backend> make_scrambled_backend(int threads) {
  return std::make_unique<ScrambledBackend>(threads);
}

HostTraffic take_host_traffic(Backend& scrambled) {
  auto* backend = dynamic_cast<ScrambledBackend*>(&scrambled);
  if (backend == nullptr)
    throw std::invalid_argument("take_host_traffic: the " + scrambled.name() +
                                " backend is not the scrambled test device");
  return backend->take_traffic();
}

}  // namespace dseek::backend
