// The CPU backend's mixed-precision matmuls (backend.hpp MatmulPrecision,
// cpu_matmul_mixed.cpp) against a float64 reference computed on the rounded or
// quantized operands, i.e. the arithmetic of a bf16 / FP8 tensor-core GEMM with fp32
// accumulation. Tolerance: fp32 accumulation of C (or N) exact products, relative to
// the sum of |products|: 1e-6. fp32 through the mixed entry point is bit for bit the
// plain matmul. The fp32 master operands are never modified.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/cpu_onednn_gemm.hpp"
#include "runtime/numerics/bf16.hpp"
#include "runtime/numerics/fp8.hpp"
#include "support/random_values.hpp"

using namespace dseek;
using backend::MatmulFormat;

namespace {
constexpr int N = 96, C = 40, OC = 56;

// out (rows, cols) = scale * a (rows, K) @ b^T (cols, K), in double; also sum |terms|.
void reference(const std::vector<float>& a, const std::vector<float>& b, int rows, int cols,
               int K, double scale, std::vector<double>& out, std::vector<double>& magnitude) {
  out.assign(static_cast<size_t>(rows) * cols, 0.0);
  magnitude.assign(out.size(), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      for (int k = 0; k < K; ++k) {
        const double t = scale * a[static_cast<size_t>(r) * K + k] * b[static_cast<size_t>(c) * K + k];
        out[static_cast<size_t>(r) * cols + c] += t;
        magnitude[static_cast<size_t>(r) * cols + c] += std::fabs(t);
      }
}

std::vector<float> transpose(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> t(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[static_cast<size_t>(c) * rows + r] = x[static_cast<size_t>(r) * cols + c];
  return t;
}

size_t count_off(const std::vector<float>& got, const std::vector<double>& want,
                 const std::vector<double>& magnitude, const std::vector<float>& before = {}) {
  size_t off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double base = before.empty() ? 0.0 : before[i];
    if (std::fabs(got[i] - base - want[i]) > 1e-6 * magnitude[i] + 1e-30) ++off;
  }
  return off;
}

std::vector<float> rounded(std::vector<float> x, MatmulFormat format, numerics::Fp8Format fp8,
                           float scale) {
  if (format == MatmulFormat::bf16) numerics::round_to_bf16(x.data(), x.data(), x.size());
  if (format == MatmulFormat::fp8) numerics::quantize_scaled(x.data(), x.data(), x.size(), scale, fp8);
  return x;
}
}  // namespace

TEST_CASE("mixed matmul: bf16 and fp8 equal the reference on rounded operands",
          "[unit][numerics]") {
  auto be = backend::make_cpu_backend(2);
  const auto inp = testing::random_values(static_cast<size_t>(N) * C, 11, 1.0f);
  const auto w = testing::random_values(static_cast<size_t>(OC) * C, 12, 0.05f);
  const auto bias = testing::random_values(static_cast<size_t>(OC), 13, 0.1f);
  const auto dout = testing::random_values(static_cast<size_t>(N) * OC, 14, 1e-3f);
  const auto dw0 = testing::random_values(w.size(), 15, 1e-2f);  // dw accumulates
  // fp8 scales as delayed scaling sets them from an amax history a little above the
  // current amax (not powers of two).
  auto amax_of = [](const std::vector<float>& x) {
    float m = 0;
    for (float v : x) m = std::max(m, std::fabs(v));
    return m;
  };
  float scales[3] = {448.0f / (1.1f * amax_of(inp)), 448.0f / (1.1f * amax_of(w)),
                     57344.0f / (1.1f * amax_of(dout))};
  float amaxes[3] = {0, 0, 0};
  for (MatmulFormat format : {MatmulFormat::bf16, MatmulFormat::fp8}) {
    INFO((format == MatmulFormat::bf16 ? "bf16" : "fp8"));
    backend::MatmulPrecision p;
    p.format = format;
    p.inp = {&scales[0], &amaxes[0]};
    p.weight = {&scales[1], &amaxes[1]};
    p.dout = {&scales[2], &amaxes[2]};
    const bool fp8 = format == MatmulFormat::fp8;
    const auto inp_q = rounded(inp, format, numerics::Fp8Format::e4m3, scales[0]);
    const auto w_q = rounded(w, format, numerics::Fp8Format::e4m3, scales[1]);
    const auto dout_q = rounded(dout, format, numerics::Fp8Format::e5m2, scales[2]);
    const double in_w = fp8 ? 1.0 / (double{scales[0]} * scales[1]) : 1.0;
    const double d_w = fp8 ? 1.0 / (double{scales[2]} * scales[1]) : 1.0;
    const double d_in = fp8 ? 1.0 / (double{scales[2]} * scales[0]) : 1.0;

    const auto inp_copy = inp, w_copy = w;
    std::vector<float> out(static_cast<size_t>(N) * OC);
    be->mixed_matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC, p);
    std::vector<double> want, magnitude;
    reference(inp_q, w_q, N, OC, C, in_w, want, magnitude);
    for (int r = 0; r < N; ++r)
      for (int o = 0; o < OC; ++o) {
        want[static_cast<size_t>(r) * OC + o] += bias[static_cast<size_t>(o)];
        magnitude[static_cast<size_t>(r) * OC + o] += std::fabs(bias[static_cast<size_t>(o)]);
      }
    CHECK(count_off(out, want, magnitude) == 0);

    std::vector<float> dinp(inp.size()), dw = dw0, dbias(static_cast<size_t>(OC), 0.0f);
    be->mixed_matmul_backward(dinp.data(), dw.data(), dbias.data(), dout.data(), inp.data(),
                              w.data(), N, C, OC, p);
    // dinp = dout @ w: as rows of dout times columns of w = rows of w^T.
    reference(dout_q, transpose(w_q, OC, C), N, C, OC, d_w, want, magnitude);
    CHECK(count_off(dinp, want, magnitude) == 0);
    // dw += dout^T @ inp.
    reference(transpose(dout_q, N, OC), transpose(inp_q, N, C), OC, C, N, d_in, want, magnitude);
    CHECK(count_off(dw, want, magnitude, dw0) == 0);
    // dbias: column sums of the unrounded output gradient.
    for (int o = 0; o < OC; ++o) {
      double sum = 0;
      for (int r = 0; r < N; ++r) sum += dout[static_cast<size_t>(r) * OC + o];
      CHECK(dbias[static_cast<size_t>(o)] == Approx(sum).epsilon(1e-5));
    }
    CHECK(inp == inp_copy);  // master operands untouched
    CHECK(w == w_copy);
    // bf16 changes the result (else the test would not see the rounding).
    std::vector<float> full(out.size());
    be->matmul_forward(full.data(), inp.data(), w.data(), bias.data(), N, C, OC);
    CHECK(full != out);
  }
  CHECK(amaxes[0] > 0.0f);
}

TEST_CASE("mixed matmul: fp32 is the plain matmul, bit for bit", "[unit][numerics]") {
  auto be = backend::make_cpu_backend(2);
  const auto inp = testing::random_values(static_cast<size_t>(N) * C, 21, 1.0f);
  const auto w = testing::random_values(static_cast<size_t>(OC) * C, 22, 0.05f);
  const auto dout = testing::random_values(static_cast<size_t>(N) * OC, 23, 1e-3f);
  std::vector<float> a(static_cast<size_t>(N) * OC), b(a.size());
  be->matmul_forward(a.data(), inp.data(), w.data(), nullptr, N, C, OC);
  be->mixed_matmul_forward(b.data(), inp.data(), w.data(), nullptr, N, C, OC, {});
  CHECK(a == b);
  std::vector<float> da(inp.size()), db(inp.size()), dwa(w.size()), dwb(w.size());
  be->matmul_backward(da.data(), dwa.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  be->mixed_matmul_backward(db.data(), dwb.data(), nullptr, dout.data(), inp.data(), w.data(), N,
                            C, OC, {});
  CHECK(da == db);
  CHECK(dwa == dwb);
}

TEST_CASE("bf16 activations: the producers' bits and the bf16-input matmuls are the fp32 op "
          "then the bf16 matmul, bit for bit", "[unit][numerics]") {
  // (The model keeps the LayerNorms' and the GELU's outputs as bf16 bits under bf16, so
  // a bf16 step must not change by a bit.) Both bf16 kernels: ctest runs this binary with
  // and without native bf16.
  auto be = backend::make_cpu_backend(2);
  const auto inp = testing::random_values(static_cast<size_t>(N) * C, 31, 2.0f);
  const auto gamma = testing::random_values(static_cast<size_t>(C), 32, 1.0f);
  const auto beta = testing::random_values(static_cast<size_t>(C), 33, 0.5f);
  std::vector<float> norm(inp.size()), mean(N), rstd(N), mean_b(N), rstd_b(N);
  std::vector<uint16_t> norm_bits(inp.size()), want_bits(inp.size());
  be->layernorm_forward(norm.data(), mean.data(), rstd.data(), inp.data(), gamma.data(),
                        beta.data(), N, C);
  be->layernorm_forward_bf16(norm_bits.data(), mean_b.data(), rstd_b.data(), inp.data(),
                             gamma.data(), beta.data(), N, C);
  numerics::to_bf16_bits(norm.data(), want_bits.data(), norm.size());
  CHECK(norm_bits == want_bits);
  CHECK(mean_b == mean);
  CHECK(rstd_b == rstd);

  // GELU over more than one of the CPU's pieces (4096) and threads' chunks
  const size_t n = 70001;
  const auto x = testing::random_values(n, 34, 4.0f);
  std::vector<float> gelu(n);
  std::vector<uint16_t> gelu_bits(n), gelu_want(n);
  be->gelu_forward(gelu.data(), x.data(), n);
  be->gelu_forward_bf16(gelu_bits.data(), x.data(), n);
  numerics::to_bf16_bits(gelu.data(), gelu_want.data(), n);
  CHECK(gelu_bits == gelu_want);

  // the matmul on those bits against mixed_matmul in bf16 on the fp32 values
  const auto w = testing::random_values(static_cast<size_t>(OC) * C, 35, 0.05f);
  const auto bias = testing::random_values(static_cast<size_t>(OC), 36, 0.1f);
  const auto dout = testing::random_values(static_cast<size_t>(N) * OC, 37, 1e-3f);
  backend::MatmulPrecision bf16;
  bf16.format = MatmulFormat::bf16;
  std::vector<float> a(static_cast<size_t>(N) * OC), b(a.size());
  be->mixed_matmul_forward(a.data(), norm.data(), w.data(), bias.data(), N, C, OC, bf16);
  be->bf16_input_matmul_forward(b.data(), norm_bits.data(), w.data(), bias.data(), N, C, OC);
  CHECK(a == b);
  std::vector<float> da(inp.size()), db(inp.size());
  std::vector<float> dwa(w.size(), 0.25f), dwb(w.size(), 0.25f), dba(OC, 1.0f), dbb(OC, 1.0f);
  be->mixed_matmul_backward(da.data(), dwa.data(), dba.data(), dout.data(), norm.data(), w.data(),
                            N, C, OC, bf16);
  be->bf16_input_matmul_backward(db.data(), dwb.data(), dbb.data(), dout.data(),
                                 norm_bits.data(), w.data(), N, C, OC);
  CHECK(da == db);
  CHECK(dwa == dwb);
  CHECK(dba == dbb);
  CHECK(dwa != std::vector<float>(w.size(), 0.25f));  // accumulated into
}

TEST_CASE("mixed matmul: fp8 without scaling state is refused by name", "[unit][numerics]") {
  auto be = backend::make_cpu_backend(1);
  std::vector<float> x(64, 1.0f), out(64);
  backend::MatmulPrecision p;
  p.format = MatmulFormat::fp8;
  CHECK_THROWS_WITH(be->mixed_matmul_forward(out.data(), x.data(), x.data(), nullptr, 8, 8, 8, p),
                    Catch::Matchers::Contains("train.precision"));
}

// Which bf16 path runs: oneDNN's GEMM where the CPU has AMX, the rounded operands on the
// fp32 sgemm elsewhere (ctest's bf16_matmuls_without_native_bf16 caps oneDNN's ISA at
// AVX2 through ONEDNN_MAX_CPU_ISA to take the second on any machine, and
// bf16_matmuls_through_onednn sets DSEEK_CPU_BF16_GEMM=onednn to take the first).
TEST_CASE("mixed matmul: matmul_kernels names the bf16 path the CPU takes",
          "[unit][numerics][bf16-path]") {
  auto be = backend::make_cpu_backend(1);
  std::vector<float> inp(static_cast<size_t>(N) * C, 0.5f), w(static_cast<size_t>(OC) * C, 0.25f);
  std::vector<float> out(static_cast<size_t>(N) * OC);
  backend::MatmulPrecision p;
  p.format = MatmulFormat::bf16;
  be->mixed_matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, C, OC, p);
  CHECK(out[0] == 0.5f * 0.25f * C);
  const std::string kernels = be->matmul_kernels();
  INFO(kernels);
  CHECK(kernels.find("oneDNN") != std::string::npos);
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap != nullptr && std::string(cap) == "AVX2") CHECK_FALSE(backend::OnednnGemm::native_bf16());
  const char* forced = std::getenv("DSEEK_CPU_BF16_GEMM");
  if (forced != nullptr && std::string(forced) == "onednn") CHECK(backend::OnednnGemm::native_bf16());
  const bool native = backend::OnednnGemm::native_bf16();
  CHECK((kernels.find("operands rounded to bf16") != std::string::npos) == !native);
  if (native && forced == nullptr) CHECK(kernels.find("bf16 brg:") != std::string::npos);  // oneDNN's brgemm
}
