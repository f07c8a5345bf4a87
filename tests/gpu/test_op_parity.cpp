// Every op of the backend interface on the CUDA backend against the CPU backend, on the
// same fresh random inputs, with odd sizes (N = B*T = 111 rows, not a multiple of 32;
// C = 48; T = 37; V = 101) so that partial warps, blocks and tiles are exercised; the
// vocabulary-parallel ops on slices that do not start at id 0.
// Tolerances: relative L2 error < 1e-5 (parity_support.hpp); reductions in double
// agree to 1e-12 relative.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "tests/gpu/parity_support.hpp"

using namespace dseek::gpu_testing;
using dseek::backend::MatmulFormat;

namespace {
constexpr int B = 3, T = 37, N = B * T, C = 48, V = 101, NH = 4;
}

TEST_CASE("encoder forward and backward match the CPU, with repeated tokens", "[gpu][ops]") {
  BackendPair pair;
  // Ids from a small range so several positions share an embedding row.
  Mirrored<int32_t> tokens(pair, random_ids(N, 7, 1));
  Mirrored<float> wte(pair, random_floats(static_cast<size_t>(V) * C, 2));
  Mirrored<float> wpe(pair, random_floats(static_cast<size_t>(T) * C, 3));
  Mirrored<float> out(pair, nan_filled(static_cast<size_t>(N) * C));
  pair.cpu->encoder_forward(out.cpu.data(), tokens.cpu.data(), wte.cpu.data(), wpe.cpu.data(), B,
                            T, C);
  pair.gpu->encoder_forward(out.gpu.data(), tokens.gpu.data(), wte.gpu.data(), wpe.gpu.data(), B,
                            T, C);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);

  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(N) * C, 4));
  Mirrored<float> dwte(pair, random_floats(static_cast<size_t>(V) * C, 5));  // accumulated
  Mirrored<float> dwpe(pair, random_floats(static_cast<size_t>(T) * C, 6));
  pair.cpu->encoder_backward(dwte.cpu.data(), dwpe.cpu.data(), dout.cpu.data(), tokens.cpu.data(),
                             B, T, C);
  pair.gpu->encoder_backward(dwte.gpu.data(), dwpe.gpu.data(), dout.gpu.data(), tokens.gpu.data(),
                             B, T, C);
  DSEEK_CHECK_PARITY(dwte, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dwpe, kFp32Tolerance);
}

TEST_CASE("layernorm forward and backward match the CPU", "[gpu][ops]") {
  BackendPair pair;
  Mirrored<float> inp(pair, random_floats(static_cast<size_t>(N) * C, 10, -2.0f, 3.0f));
  Mirrored<float> w(pair, random_floats(C, 11, 0.5f, 1.5f));
  Mirrored<float> b(pair, random_floats(C, 12));
  Mirrored<float> out(pair, nan_filled(static_cast<size_t>(N) * C));
  Mirrored<float> mean(pair, nan_filled(N));
  Mirrored<float> rstd(pair, nan_filled(N));
  pair.cpu->layernorm_forward(out.cpu.data(), mean.cpu.data(), rstd.cpu.data(), inp.cpu.data(),
                              w.cpu.data(), b.cpu.data(), N, C);
  pair.gpu->layernorm_forward(out.gpu.data(), mean.gpu.data(), rstd.gpu.data(), inp.gpu.data(),
                              w.gpu.data(), b.gpu.data(), N, C);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);
  DSEEK_CHECK_PARITY(mean, kFp32Tolerance);
  DSEEK_CHECK_PARITY(rstd, kFp32Tolerance);

  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(N) * C, 13));
  // dinp, dw and db all accumulate: start them from known values.
  Mirrored<float> dinp(pair, random_floats(static_cast<size_t>(N) * C, 14));
  Mirrored<float> dw(pair, random_floats(C, 15));
  Mirrored<float> db(pair, random_floats(C, 16));
  pair.cpu->layernorm_backward(dinp.cpu.data(), dw.cpu.data(), db.cpu.data(), dout.cpu.data(),
                               inp.cpu.data(), w.cpu.data(), mean.cpu.data(), rstd.cpu.data(), N,
                               C);
  pair.gpu->layernorm_backward(dinp.gpu.data(), dw.gpu.data(), db.gpu.data(), dout.gpu.data(),
                               inp.gpu.data(), w.gpu.data(), mean.gpu.data(), rstd.gpu.data(), N,
                               C);
  DSEEK_CHECK_PARITY(dinp, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dw, kFp32Tolerance);
  DSEEK_CHECK_PARITY(db, kFp32Tolerance);
}

TEST_CASE("matmul forward and backward match the CPU, with and without bias", "[gpu][ops]") {
  BackendPair pair;
  const int OC = 3 * C + 5;  // 149: odd on purpose
  const bool with_bias = GENERATE(true, false);
  INFO("bias: " << with_bias);
  Mirrored<float> inp(pair, random_floats(static_cast<size_t>(N) * C, 20));
  Mirrored<float> w(pair, random_floats(static_cast<size_t>(OC) * C, 21));
  Mirrored<float> bias(pair, random_floats(OC, 22));
  Mirrored<float> out(pair, nan_filled(static_cast<size_t>(N) * OC));
  pair.cpu->matmul_forward(out.cpu.data(), inp.cpu.data(), w.cpu.data(),
                           with_bias ? bias.cpu.data() : nullptr, N, C, OC);
  pair.gpu->matmul_forward(out.gpu.data(), inp.gpu.data(), w.gpu.data(),
                           with_bias ? bias.gpu.data() : nullptr, N, C, OC);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);

  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(N) * OC, 23));
  Mirrored<float> dinp(pair, nan_filled(static_cast<size_t>(N) * C));  // overwritten
  Mirrored<float> dw(pair, random_floats(static_cast<size_t>(OC) * C, 24));  // accumulated
  Mirrored<float> dbias(pair, random_floats(OC, 25));
  pair.cpu->matmul_backward(dinp.cpu.data(), dw.cpu.data(), with_bias ? dbias.cpu.data() : nullptr,
                            dout.cpu.data(), inp.cpu.data(), w.cpu.data(), N, C, OC);
  pair.gpu->matmul_backward(dinp.gpu.data(), dw.gpu.data(), with_bias ? dbias.gpu.data() : nullptr,
                            dout.gpu.data(), inp.gpu.data(), w.gpu.data(), N, C, OC);
  DSEEK_CHECK_PARITY(dinp, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dw, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dbias, kFp32Tolerance);  // untouched without bias: equal start values
}

TEST_CASE("matmul backward without dinp leaves it alone and still accumulates dw", "[gpu][ops]") {
  BackendPair pair;
  const int OC = 33;
  Mirrored<float> inp(pair, random_floats(static_cast<size_t>(N) * C, 26));
  Mirrored<float> w(pair, random_floats(static_cast<size_t>(OC) * C, 27));
  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(N) * OC, 28));
  Mirrored<float> dw(pair, random_floats(static_cast<size_t>(OC) * C, 29));
  pair.cpu->matmul_backward(nullptr, dw.cpu.data(), nullptr, dout.cpu.data(), inp.cpu.data(),
                            w.cpu.data(), N, C, OC);
  pair.gpu->matmul_backward(nullptr, dw.gpu.data(), nullptr, dout.gpu.data(), inp.gpu.data(),
                            w.gpu.data(), N, C, OC);
  DSEEK_CHECK_PARITY(dw, kFp32Tolerance);
}

namespace {
// DSEEK_CUDA_ATTENTION for the backends made while it lives (read at construction).
class AttentionKernels {
 public:
  explicit AttentionKernels(const char* kernels) {
    if (const char* old = std::getenv("DSEEK_CUDA_ATTENTION")) previous_ = old;
    setenv("DSEEK_CUDA_ATTENTION", kernels, 1);
  }
  ~AttentionKernels() {
    if (previous_.empty())
      unsetenv("DSEEK_CUDA_ATTENTION");
    else
      setenv("DSEEK_CUDA_ATTENTION", previous_.c_str(), 1);
  }

 private:
  std::string previous_;
};

// Forward and backward of one attention shape on both backends, its products in `format`
// within `tolerance` (relative L2).
void check_attention(int batch, int steps, int channels, int heads,
                     MatmulFormat format = MatmulFormat::fp32,
                     double tolerance = kFp32Tolerance) {
  BackendPair pair;
  const int rows = batch * steps;
  INFO("B = " << batch << ", T = " << steps << ", C = " << channels << ", NH = " << heads);
  Mirrored<float> qkv(pair, random_floats(static_cast<size_t>(rows) * 3 * channels, 30));
  Mirrored<float> out(pair, nan_filled(static_cast<size_t>(rows) * channels));
  Mirrored<float> att_cpu_side(
      pair, nan_filled(pair.cpu->attention_state_floats(batch, steps, channels, heads)));
  // Each side's attention state, NaN-filled; only the GPU's copy of att_gpu_side is used.
  Mirrored<float> att_gpu_side(
      pair, nan_filled(pair.gpu->attention_state_floats(batch, steps, channels, heads)));
  float* att_gpu = att_gpu_side.gpu.data();
  // The CUDA backend saves one logsumexp per row and head, not the T x T probabilities.
  CHECK(pair.gpu->attention_state_floats(batch, steps, channels, heads) ==
        static_cast<size_t>(batch) * heads * steps);
  pair.cpu->attention_forward(out.cpu.data(), att_cpu_side.cpu.data(), qkv.cpu.data(), batch,
                              steps, channels, heads, format);
  pair.gpu->attention_forward(out.gpu.data(), att_gpu, qkv.gpu.data(), batch, steps, channels,
                              heads, format);
  DSEEK_CHECK_PARITY(out, tolerance);
  // Every logsumexp was written.
  CHECK(count_nan(att_gpu_side.gpu_values()) == 0);

  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(rows) * channels, 31));
  Mirrored<float> dqkv(pair, nan_filled(static_cast<size_t>(rows) * 3 * channels));  // overwritten
  pair.cpu->attention_backward(dqkv.cpu.data(), dout.cpu.data(), qkv.cpu.data(),
                               out.cpu.data(), att_cpu_side.cpu.data(), batch, steps, channels,
                               heads, format);
  pair.gpu->attention_backward(dqkv.gpu.data(), dout.gpu.data(), qkv.gpu.data(),
                               out.gpu.data(), att_gpu, batch, steps, channels, heads, format);
  DSEEK_CHECK_PARITY(dqkv, tolerance);

  // Deterministic: the same inputs again give bit-identical gradients.
  const std::vector<float> first = dqkv.gpu_values();
  pair.gpu->attention_backward(dqkv.gpu.data(), dout.gpu.data(), qkv.gpu.data(),
                               out.gpu.data(), att_gpu, batch, steps, channels, heads, format);
  CHECK(dqkv.gpu_values() == first);
}
}  // namespace

TEST_CASE("attention forward and backward match the CPU", "[gpu][ops][attention]") {
  // Head sizes 12, 24, 48 (the tiled kernels, one partial tile of 37 rows) and 96 (the
  // warp-per-row kernels: three values per lane).
  const int heads = GENERATE(4, 1);
  const int channels = GENERATE(48, 96);
  check_attention(B, T, channels, heads);
}

TEST_CASE("tiled attention over several tiles matches the CPU", "[gpu][ops][attention]") {
  // T = 150: query and key tiles 0, 1 and a partial 2 (22 rows), the diagonal tiles
  // masked; head size 64 (GPT-2's, every dimension of a tile) and 40 (zero-padded).
  const int channels = GENERATE(128, 80);
  check_attention(2, 150, channels, 2);
}

TEST_CASE("bf16 attention matches the CPU's bf16 attention", "[gpu][ops][attention][bf16]") {
  // Both round every product's operands to bf16; the GPU its probabilities before they
  // are normalized, the CPU after, so single operands may round apart by one bf16 step
  // (2^-8 relative): 1e-2 relative L2. Tiled (head size 64) and warp-per-row (96).
  AttentionKernels tiled("tiled");
  const int channels = GENERATE(128, 192);
  check_attention(2, 150, channels, 2, MatmulFormat::bf16, 1e-2);
}

TEST_CASE("cuDNN attention matches the CPU's bf16 attention", "[gpu][ops][attention][bf16][cudnn]") {
  // cuDNN's fused flash attention (DSEEK_CUDA_ATTENTION=cudnn: an error, not the tiled
  // kernels, if cuDNN cannot run it). Its operands are rounded to bf16 as the CPU's, and
  // its output and dqkv come back as bf16 values (one more rounding, 2^-9 relative):
  // 1e-2 relative L2. Head sizes 64 (GPT-2's) and 128 (cuDNN's largest), T = 150 (not a
  // multiple of its tiles), and a deterministic backward (the check in check_attention).
  AttentionKernels cudnn("cudnn");
  const int channels = GENERATE(128, 256);
  check_attention(2, 150, channels, 2, MatmulFormat::bf16, 1e-2);
}

TEST_CASE("cuDNN attention refuses what it cannot run, by name", "[gpu][ops][attention][cudnn]") {
  AttentionKernels cudnn("cudnn");
  BackendPair pair;
  dseek::backend::DeviceBuffer<float> scratch(*pair.gpu, 3 * 4 * 36);
  // head size 12: not a multiple of 8
  CHECK_THROWS_WITH(pair.gpu->attention_forward(scratch.data(), scratch.data(), scratch.data(), 1,
                                                4, 36, 3, MatmulFormat::bf16),
                    Catch::Contains("DSEEK_CUDA_ATTENTION=cudnn") &&
                        Catch::Contains("multiple of 8"));
}

TEST_CASE("attention refuses head sizes its kernels do not handle", "[gpu][ops][attention]") {
  BackendPair pair;
  dseek::backend::DeviceBuffer<float> scratch(*pair.gpu, 16);
  // C = 512 with one head: head size 512 > kMaxHeadSize (256).
  CHECK_THROWS_WITH(pair.gpu->attention_forward(scratch.data(), scratch.data(), scratch.data(), 1,
                                                1, 512, 1, MatmulFormat::fp32),
                    Catch::Contains("head size of at most 256"));
}

TEST_CASE("gelu and residual match the CPU, and gelu backward runs in place", "[gpu][ops]") {
  BackendPair pair;
  const size_t n = static_cast<size_t>(N) * 4 * C + 3;
  Mirrored<float> inp(pair, random_floats(n, 40, -4.0f, 4.0f));
  Mirrored<float> out(pair, nan_filled(n));
  pair.cpu->gelu_forward(out.cpu.data(), inp.cpu.data(), n);
  pair.gpu->gelu_forward(out.gpu.data(), inp.gpu.data(), n);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);

  Mirrored<float> dout(pair, random_floats(n, 41));
  Mirrored<float> dinp(pair, nan_filled(n));
  pair.cpu->gelu_backward(dinp.cpu.data(), inp.cpu.data(), dout.cpu.data(), n);
  pair.gpu->gelu_backward(dinp.gpu.data(), inp.gpu.data(), dout.gpu.data(), n);
  DSEEK_CHECK_PARITY(dinp, kFp32Tolerance);
  // In place (dinp aliases dout), as the model calls it.
  pair.cpu->gelu_backward(dout.cpu.data(), inp.cpu.data(), dout.cpu.data(), n);
  pair.gpu->gelu_backward(dout.gpu.data(), inp.gpu.data(), dout.gpu.data(), n);
  DSEEK_CHECK_PARITY(dout, kFp32Tolerance);
  CHECK(relative_l2(dout.gpu_values(), dinp.cpu_values()) < kFp32Tolerance);

  Mirrored<float> a(pair, random_floats(n, 42));
  Mirrored<float> b(pair, random_floats(n, 43));
  Mirrored<float> sum(pair, nan_filled(n));
  pair.cpu->residual_forward(sum.cpu.data(), a.cpu.data(), b.cpu.data(), n);
  pair.gpu->residual_forward(sum.gpu.data(), a.gpu.data(), b.gpu.data(), n);
  DSEEK_CHECK_PARITY(sum, kFp32Tolerance);
}

TEST_CASE("softmax cross-entropy forward and backward match the CPU", "[gpu][ops]") {
  BackendPair pair;
  const int vocab = GENERATE(101, 1027);  // under and over one block of 256 threads per row
  INFO("V = " << vocab);
  Mirrored<float> logits(pair, random_floats(static_cast<size_t>(N) * vocab, 50, -6.0f, 6.0f));
  Mirrored<int32_t> targets(pair, random_ids(N, vocab, 51));
  Mirrored<float> losses(pair, nan_filled(N));
  pair.cpu->softmax_cross_entropy_forward(logits.cpu.data(), losses.cpu.data(), targets.cpu.data(),
                                          N, vocab);
  pair.gpu->softmax_cross_entropy_forward(logits.gpu.data(), losses.gpu.data(), targets.gpu.data(),
                                          N, vocab);
  DSEEK_CHECK_PARITY(logits, kFp32Tolerance);  // now probabilities
  DSEEK_CHECK_PARITY(losses, kFp32Tolerance);

  const float dloss = 1.0f / static_cast<float>(N);
  pair.cpu->softmax_cross_entropy_backward(logits.cpu.data(), targets.cpu.data(), N, vocab, dloss);
  pair.gpu->softmax_cross_entropy_backward(logits.gpu.data(), targets.gpu.data(), N, vocab, dloss);
  DSEEK_CHECK_PARITY(logits, kFp32Tolerance);  // now dlogits
}

TEST_CASE("vocabulary-parallel embedding matches the CPU, on a slice not starting at 0",
          "[gpu][ops][vocab_parallel]") {
  BackendPair pair;
  // Rank 1 of 3 over V = 101 would hold 33 rows; an odd slice [17, 47) exercises both the
  // held and the skipped tokens, and repeated ones (ids from the whole vocabulary).
  const dseek::backend::VocabSlice slice{17, 30};
  const bool with_positions = GENERATE(true, false);
  INFO("wpe: " << with_positions);
  Mirrored<int32_t> tokens(pair, random_ids(N, V, 100));
  Mirrored<float> wte(pair, random_floats(static_cast<size_t>(slice.rows) * C, 101));
  Mirrored<float> wpe(pair, random_floats(static_cast<size_t>(T) * C, 102));
  Mirrored<float> out(pair, nan_filled(static_cast<size_t>(N) * C));
  pair.cpu->vocab_parallel_encoder_forward(out.cpu.data(), tokens.cpu.data(), wte.cpu.data(),
                                           with_positions ? wpe.cpu.data() : nullptr, slice, B, T,
                                           C);
  pair.gpu->vocab_parallel_encoder_forward(out.gpu.data(), tokens.gpu.data(), wte.gpu.data(),
                                           with_positions ? wpe.gpu.data() : nullptr, slice, B, T,
                                           C);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);
  // A copy, a zero or one add per element: the GPU's bits are the CPU's.
  CHECK(out.gpu_values() == out.cpu_values());

  Mirrored<float> dout(pair, random_floats(static_cast<size_t>(N) * C, 103));
  Mirrored<float> dwte(pair, random_floats(static_cast<size_t>(slice.rows) * C, 104));
  Mirrored<float> dwpe(pair, random_floats(static_cast<size_t>(T) * C, 105));
  pair.cpu->vocab_parallel_encoder_backward(dwte.cpu.data(), dwpe.cpu.data(), dout.cpu.data(),
                                            tokens.cpu.data(), slice, B, T, C);
  pair.gpu->vocab_parallel_encoder_backward(dwte.gpu.data(), dwpe.gpu.data(), dout.gpu.data(),
                                            tokens.gpu.data(), slice, B, T, C);
  DSEEK_CHECK_PARITY(dwte, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dwpe, kFp32Tolerance);
}

TEST_CASE("vocabulary-parallel cross-entropy pieces match the CPU", "[gpu][ops][vocab_parallel]") {
  BackendPair pair;
  // This rank is rank 1 of 3 with V_local rows from id V_local; the targets come from
  // the whole vocabulary of 3 V_local, so about a third are held here.
  const int local = GENERATE(101, 1027);  // under and over one block of 256 threads per row
  // Its last `padded` rows pad model.vocab beyond the data's ids (all of them: a rank
  // that holds only padding): out of the maximum and the sums, probability 0.
  const int padded = GENERATE(0, 37, -1);
  const int ranks = 3, rank = 1;
  const dseek::backend::VocabSlice slice{local, local, padded < 0 ? local : padded};
  INFO("V_local = " << local << ", padded " << slice.padded);
  const std::vector<float> host_logits =
      random_floats(static_cast<size_t>(N) * local, 110, -6.0f, 6.0f);
  Mirrored<float> logits(pair, host_logits);
  // Targets are real ids: none in the padded rows.
  std::vector<int32_t> host_targets = random_ids(N, ranks * local, 111);
  for (int32_t& id : host_targets)
    if (id >= slice.begin + slice.real_rows() && id < slice.begin + slice.rows) id = 0;
  Mirrored<int32_t> targets(pair, host_targets);

  Mirrored<float> slots(pair, nan_filled(static_cast<size_t>(N) * ranks));
  pair.cpu->vocab_parallel_logit_max(slots.cpu.data(), logits.cpu.data(), slice, N, rank, ranks);
  pair.gpu->vocab_parallel_logit_max(slots.gpu.data(), logits.gpu.data(), slice, N, rank, ranks);
  // A maximum and zeros: exact on both.
  CHECK(count_nan(slots.gpu_values()) == 0);
  CHECK(slots.gpu_values() == slots.cpu_values());

  // The all-reduced slots as the group would leave them: the other ranks' maxima from
  // the same range, some above this rank's, some below.
  std::vector<float> reduced = slots.cpu_values();
  const std::vector<float> others = random_floats(static_cast<size_t>(N) * ranks, 112, 4.0f, 7.0f);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < ranks; ++k)
      if (k != rank) reduced[static_cast<size_t>(n * ranks + k)] = others[static_cast<size_t>(n * ranks + k)];
  Mirrored<float> max_slots(pair, reduced);
  Mirrored<float> sums(pair, nan_filled(2 * static_cast<size_t>(N)));
  pair.cpu->vocab_parallel_exp_sums(logits.cpu.data(), sums.cpu.data(), max_slots.cpu.data(),
                                    targets.cpu.data(), slice, N, ranks);
  pair.gpu->vocab_parallel_exp_sums(logits.gpu.data(), sums.gpu.data(), max_slots.gpu.data(),
                                    targets.gpu.data(), slice, N, ranks);
  DSEEK_CHECK_PARITY(logits, kFp32Tolerance);  // now exponentials
  DSEEK_CHECK_PARITY(sums, kFp32Tolerance);    // sums, then target logits (0 where not held)

  // The group's sums: this rank's plus the others' (any positive values).
  std::vector<float> group_sums = sums.cpu_values();
  const std::vector<float> extra = random_floats(static_cast<size_t>(N), 113, 0.5f, 20.0f);
  for (int n = 0; n < N; ++n) group_sums[static_cast<size_t>(n)] += extra[static_cast<size_t>(n)];
  Mirrored<float> all_sums(pair, group_sums);
  Mirrored<float> losses(pair, nan_filled(N));
  pair.cpu->vocab_parallel_softmax_loss(logits.cpu.data(), losses.cpu.data(), all_sums.cpu.data(),
                                        N, local);
  pair.gpu->vocab_parallel_softmax_loss(logits.gpu.data(), losses.gpu.data(), all_sums.gpu.data(),
                                        N, local);
  DSEEK_CHECK_PARITY(logits, kFp32Tolerance);  // now this slice's probabilities
  DSEEK_CHECK_PARITY(losses, kFp32Tolerance);

  const float dloss = 1.0f / static_cast<float>(N);
  pair.cpu->vocab_parallel_cross_entropy_backward(logits.cpu.data(), targets.cpu.data(), slice, N,
                                                  dloss);
  pair.gpu->vocab_parallel_cross_entropy_backward(logits.gpu.data(), targets.gpu.data(), slice, N,
                                                  dloss);
  DSEEK_CHECK_PARITY(logits, kFp32Tolerance);  // now dlogits
}

TEST_CASE("adamw matches the CPU", "[gpu][ops]") {
  BackendPair pair;
  const size_t n = 100003;
  Mirrored<float> params(pair, random_floats(n, 60));
  Mirrored<float> grads(pair, random_floats(n, 61, -0.1f, 0.1f));
  Mirrored<float> m(pair, random_floats(n, 62, -0.01f, 0.01f));
  Mirrored<float> v(pair, random_floats(n, 63, 0.0f, 1e-3f));
  for (int64_t step = 1; step <= 3; ++step) {
    pair.cpu->adamw_update(params.cpu.data(), grads.cpu.data(), m.cpu.data(), v.cpu.data(), n,
                           3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
    pair.gpu->adamw_update(params.gpu.data(), grads.gpu.data(), m.gpu.data(), v.gpu.data(), n,
                           3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
  }
  DSEEK_CHECK_PARITY(params, kFp32Tolerance);
  DSEEK_CHECK_PARITY(m, kFp32Tolerance);
  DSEEK_CHECK_PARITY(v, kFp32Tolerance);
}

// Compressed gradients' AdamW with a given second moment (v read, not written), with
// the update's RMS capped (cap 1e-3: below this data's RMS, so the cap scales) and
// without a cap; the RMS's double sum differs only in order.
TEST_CASE("adamw with a given second moment matches the CPU, capped and not", "[gpu][ops]") {
  BackendPair pair;
  const size_t n = 100003;
  const double cap = GENERATE(0.0, 1e-3);
  INFO("cap " << cap);
  Mirrored<float> params(pair, random_floats(n, 64));
  Mirrored<float> grads(pair, random_floats(n, 65, -0.1f, 0.1f));
  Mirrored<float> m(pair, random_floats(n, 66, -0.01f, 0.01f));
  Mirrored<float> v(pair, random_floats(n, 67, 1e-6f, 1e-3f));
  for (int step = 1; step <= 3; ++step) {
    const float correction = 1.0f / (1.0f - std::pow(0.6f, static_cast<float>(step)));
    for (Backend* backend : {pair.cpu.get(), pair.gpu.get()}) {
      const bool cpu = backend == pair.cpu.get();
      backend->adamw_given_moment_update(cpu ? params.cpu.data() : params.gpu.data(),
                                         cpu ? grads.cpu.data() : grads.gpu.data(),
                                         cpu ? m.cpu.data() : m.gpu.data(),
                                         cpu ? v.cpu.data() : v.gpu.data(), n, 0.6f, 1e-8f, 0.5f,
                                         0.99997f, 3e-4f * correction, correction, cap);
    }
  }
  DSEEK_CHECK_PARITY(params, kFp32Tolerance);
  DSEEK_CHECK_PARITY(m, kFp32Tolerance);
  CHECK(v.gpu_values() == v.cpu_values());  // read only: untouched on both
}

TEST_CASE("sum and sum of squares in double match the CPU", "[gpu][ops]") {
  BackendPair pair;
  const size_t n = GENERATE(size_t{1}, size_t{1000003});
  INFO("n = " << n);
  const std::vector<float> values = random_floats(n, 70, -1.0f, 2.0f);
  Mirrored<float> x(pair, values);
  double magnitude = 0.0, squares = 0.0;
  for (float value : values) {
    magnitude += std::abs(static_cast<double>(value));
    squares += static_cast<double>(value) * value;
  }
  // Both sum float values in double; only the order differs: ~n * 1e-16 relative to the
  // sum of magnitudes.
  CHECK(std::abs(pair.gpu->sum(x.gpu.data(), n) - pair.cpu->sum(x.cpu.data(), n)) <=
        1e-12 * magnitude);
  CHECK(std::abs(pair.gpu->sum_squares(x.gpu.data(), n) - pair.cpu->sum_squares(x.cpu.data(), n)) <=
        1e-12 * squares);
}

TEST_CASE("zero clears and copies round-trip on the GPU", "[gpu][ops]") {
  BackendPair pair;
  const size_t n = 1001;
  Mirrored<float> x(pair, random_floats(n, 80));
  CHECK(x.gpu_values() == x.cpu_values());  // copy_from_host then copy_to_host is exact
  pair.gpu->zero(x.gpu.data(), n - 1);
  const std::vector<float> cleared = x.gpu_values();
  for (size_t i = 0; i + 1 < n; ++i) REQUIRE(cleared[i] == 0.0f);
  CHECK(cleared[n - 1] == x.cpu_values()[n - 1]);  // one past the range is kept
}

TEST_CASE("scale (the loss scaler's unscaling) gives the CPU's bits, the range only",
          "[gpu][ops]") {
  BackendPair pair;
  const size_t n = 100003;
  std::vector<float> values = random_floats(n, 90, -3e4f, 3e4f);
  values[7] = std::numeric_limits<float>::infinity();  // an overflowed gradient stays one
  Mirrored<float> x(pair, values);
  // A power of two: exact on both, so the bits must be equal, not merely close.
  const float factor = 1.0f / 65536.0f;
  pair.cpu->scale(x.cpu.data() + 1, n - 2, factor);
  pair.gpu->scale(x.gpu.data() + 1, n - 2, factor);
  const std::vector<float> gpu = x.gpu_values(), cpu = x.cpu_values();
  CHECK(std::memcmp(gpu.data(), cpu.data(), n * sizeof(float)) == 0);
  CHECK(gpu[0] == values[0]);          // before the range: kept
  CHECK(gpu[n - 1] == values[n - 1]);  // after it: kept
  CHECK(std::isinf(gpu[7]));
}
