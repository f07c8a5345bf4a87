// oneDNN matmul primitives for the CPU backend (cpu_matmul_mixed.cpp):
//   c (M, N) = a (M, K) @ b (K, N) [+ bias (N)] [+ c]
// a and b are strided views (any row and column strides, so transposes cost nothing) in
// bf16 or fp32, c and bias fp32, accumulation fp32. One primitive per shape and pool
// thread, created on a thread's first call with that shape and reused ever after (each
// thread its own primitives, stream and scratchpad: no locks, nothing shared). oneDNN runs
// single-threaded inside the call, as OpenBLAS does in cpu_matmul.cpp: the backend's pool
// splits the rows, so results are deterministic for a thread count. The scratchpad and
// the packed weights are ours (grown on first use), so dseek allocates nothing in a step
// after the first; oneDNN itself still does per call (counted with a malloc hook,
// 2026-12-01: 6 small blocks per execute for its argument map and context with the brgemm
// implementation, 8 with gemm:jit, which also takes its packing workspace from the heap).
// oneDNN's header stays in the .cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dseek::backend {

enum class GemmType { f32, bf16 };  // of a and b; c is always fp32

struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  int64_t a_row = 0, a_col = 1;  // element strides of a (M, K)
  int64_t b_row = 0, b_col = 1;  // of b (K, N)
  int64_t c_row = 0;             // row stride of c; its columns are contiguous
  GemmType type = GemmType::bf16;
  bool bias = false;        // + bias[n]
  bool accumulate = false;  // c += a @ b (else c is overwritten)
  // b is pack_b's result for this shape (the strides above then say what was packed).
  bool packed_b = false;
  bool operator==(const GemmShape&) const = default;
};

class OnednnGemm {
 public:
  explicit OnednnGemm(int threads);
  ~OnednnGemm();
  OnednnGemm(const OnednnGemm&) = delete;
  OnednnGemm& operator=(const OnednnGemm&) = delete;

  // On pool thread `thread` only (0 <= thread < threads). Throws std::runtime_error,
  // naming the shape, if oneDNN has no primitive for it.
  void run(int thread, const GemmShape& shape, const void* a, const void* b, float* c,
           const float* bias);

  // Weights pre-packed: b (strided as `shape` says) reordered, on pool thread `thread`,
  // into the layout oneDNN's primitive for `shape` with packed_b prefers (blocked, bf16
  // pairs interleaved), in a buffer kept here per shape; returns it. Every thread that
  // then runs that same shape reads the one packed copy instead of re-laying b out
  // inside each call.
  const void* pack_b(int thread, GemmShape shape, const void* b);

  // oneDNN's version and the CPU ISA it dispatches to, e.g. "oneDNN 2.6.3, isa
  // avx512_core_bf16", then each implementation the primitives so far run with and how
  // many shapes use it, e.g. "bf16 brg:avx512_core_bf16 x8, bf16 gemm:jit x4".
  std::string report() const;

  // Whether the backend runs its bf16 matmuls here: where oneDNN dispatches bf16 to AMX
  // (the ISA it reports, which ONEDNN_MAX_CPU_ISA may lower), or to AVX-512 BF16 on an
  // AMD CPU (Zen 4 issues vdpbf16ps at twice its fp32 FMA rate: 195 against 100 GFLOP/s
  // on one core, 2026-12-07). On an Intel CPU with AVX-512 BF16 but no AMX its bf16 GEMM
  // is slower than OpenBLAS's fp32 sgemm (80 against 140 GFLOP/s, 2026-12-03), and
  // without either it is emulated, so the backend takes the sgemm on rounded operands
  // there. A rule of the CPU, not a timing, so every node of a job on one kind of
  // machine computes the same bits. DSEEK_CPU_BF16_GEMM = "onednn" or "sgemm" picks one
  // whatever the CPU (onednn needs AVX-512: elsewhere it is refused, naming the CPU's isa).
  static bool native_bf16();

 private:
  struct Impl;
  struct Entry;
  Entry& entry(int thread, const GemmShape& shape);  // found or created
  std::unique_ptr<Impl> impl_;
};

}  // namespace dseek::backend
