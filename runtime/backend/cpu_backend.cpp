// CpuBackend: construction, memory, and the reductions. The ops are in cpu_*.cpp.
#include "runtime/backend/cpu_backend.hpp"
#include "runtime/backend/openblas_kernel.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

namespace dseek::backend {

namespace {
int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}
}  // namespace

CpuBackend::CpuBackend(int threads, std::shared_ptr<HostMemory> memory)
    : memory_(std::move(memory)), pool_(resolve_threads(threads)), gemm_(pool_.size()) {
  // sgemm runs single-threaded inside our chunks (see thread_pool.hpp).
  openblas_set_num_threads(1);
  scratch_.resize(static_cast<size_t>(pool_.size()));
  partials_.resize(static_cast<size_t>(pool_.size()));
}

double CpuBackend::now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string CpuBackend::matmul_kernels() const {
  const std::string blas = openblas_kernels();
  if (!native_bf16_)
    return "fp32: " + blas + "; bf16: operands rounded to bf16, " + blas + " sgemm (" +
           gemm_.report() + ": neither AMX nor an AMD CPU's AVX-512 BF16, oneDNN's bf16 "
           "would be slower)";
  return "fp32: " + blas + "; bf16: " + gemm_.report();
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

std::unique_ptr<Backend> make_cpu_backend(int threads, std::shared_ptr<HostMemory> memory) {
  return std::make_unique<CpuBackend>(threads, std::move(memory));
}

namespace {
// Each block starts with one cache line that records its size, for memory_usage().
constexpr size_t kHeader = 64;
}  // namespace

void* CpuBackend::allocate(size_t bytes) {
  // 64-byte alignment: whole cache lines and aligned AVX-512 loads.
  size_t rounded = (bytes + 63) / 64 * 64;
  // The host memory zero-fills (host_memory.hpp).
  char* base = static_cast<char*>(memory_->allocate(kHeader + rounded));
  std::memcpy(base, &rounded, sizeof rounded);
  const size_t in_use = in_use_bytes_.fetch_add(rounded) + rounded;
  size_t peak = peak_bytes_.load();
  while (in_use > peak && !peak_bytes_.compare_exchange_weak(peak, in_use)) {
  }
  return base + kHeader;
}

void CpuBackend::release(void* pointer) {
  if (pointer == nullptr) return;
  char* base = static_cast<char*>(pointer) - kHeader;
  size_t rounded = 0;
  std::memcpy(&rounded, base, sizeof rounded);
  in_use_bytes_.fetch_sub(rounded);
  memory_->release(base);
}

MemoryUsage CpuBackend::memory_usage() const { return {in_use_bytes_.load(), peak_bytes_.load()}; }

void CpuBackend::zero(float* x, size_t n) {
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    std::memset(x + begin, 0, (end - begin) * sizeof(float));
  }, 1 << 16);
}

void CpuBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

float* CpuBackend::scratch(int thread, size_t floats) {
  auto& buffer = scratch_[static_cast<size_t>(thread)];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// Per-thread partial sums in double, added in thread order: deterministic for a thread
// count. `term` maps an element to what is summed.
template <class Term>
double CpuBackend::reduce_sum(const float* x, size_t n, Term term) {
  std::fill(partials_.begin(), partials_.end(), 0.0);
  pool_.parallel_for(n, [&](size_t begin, size_t end, int thread) {
    double total = 0.0;
#pragma omp simd reduction(+ : total)
    for (size_t i = begin; i < end; ++i) total += term(static_cast<double>(x[i]));
    partials_[static_cast<size_t>(thread)] = total;
  }, 1 << 15);
  double total = 0.0;
  for (double value : partials_) total += value;
  return total;
}

double CpuBackend::sum_squares(const float* x, size_t n) {
  return reduce_sum(x, n, [](double v) { return v * v; });
}

double CpuBackend::sum(const float* x, size_t n) {
  return reduce_sum(x, n, [](double v) { return v; });
}

void CpuBackend::scale(float* x, size_t n, float factor) {
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) x[i] *= factor;
  }, 1 << 15);
}

}  // namespace dseek::backend
