// The CUDA backend's bf16 and FP8 linear layers (gpu/cuda_mixed_matmul.hpp) against the
// CPU backend's mixed_matmul (runtime/backend/cpu_matmul_mixed.cpp, the reference
// numerics) on the same inputs, scales and amax start values.
//
// Tolerance: both sides round (bf16) or quantize (fp8, with identical scales) the same
// fp32 operands to the same values, every product of two such values is exact in fp32,
// and both accumulate in fp32 -- except Hopper's FP8 tensor cores, whose accumulator is
// narrower than fp32 (about 14 bits, DeepSeek-V3 report section 3.3.2; bench/gpu/
// gemm_check.cu measured up to 2.6e-4 of the largest output on an H200) -- so the outputs
// differ only by the order of the additions: relative L2 error below 1e-5
// (parity_support.hpp's kFp32Tolerance) for bf16, below 1e-3 for the products of fp8
// operands (kFp8ProductTolerance). Overwritten outputs
// start as NaN on both sides; accumulated ones (dw, dbias) start from the same random
// values. The amaxes must come out bit-equal: a max of the same values.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/device_info.hpp"
#include "runtime/numerics/bf16.hpp"
#include "tests/gpu/parity_support.hpp"

using namespace dseek;
using namespace dseek::gpu_testing;
using backend::MatmulFormat;
using backend::MatmulPrecision;

namespace {

bool device_runs_fp8() {
  const gpu::DeviceQuery query = gpu::query_devices();
  return !query.devices.empty() && query.devices.front().compute_major >= 9;
}

// One FP8 operand's scaling state, in both backends' memory.
struct Scaling {
  Scaling(BackendPair& pair, float scale_value, float amax_start)
      : scale(pair, {scale_value}), amax(pair, {amax_start}) {}
  backend::Fp8OperandScaling cpu() { return {scale.cpu.data(), amax.cpu.data()}; }
  backend::Fp8OperandScaling gpu() { return {scale.gpu.data(), amax.gpu.data()}; }
  Mirrored<float> scale, amax;
};

// The fp8 precision of one matmul on each side. Scales put |x| <= 1 well inside E4M3
// (448) and the gradients inside E5M2 (57344); the weight's amax starts ABOVE its
// max |w| (must stay), the others below (must be raised to max |x|).
struct Fp8State {
  explicit Fp8State(BackendPair& pair)
      : inp(pair, 64.0f, 0.25f), weight(pair, 128.0f, 4.0f), dout(pair, 1024.0f, 0.0f) {}
  MatmulPrecision cpu() { return {MatmulFormat::fp8, inp.cpu(), weight.cpu(), dout.cpu()}; }
  MatmulPrecision gpu() { return {MatmulFormat::fp8, inp.gpu(), weight.gpu(), dout.gpu()}; }
  Scaling inp, weight, dout;
};

void check_amax_equal(Scaling& scaling, const char* operand) {
  INFO(operand);
  CHECK(scaling.amax.gpu_values() == scaling.amax.cpu_values());
}

struct Shape {
  int N, C, OC;
};

// Products of fp8 operands: the tensor cores' narrow accumulator (see the top).
constexpr double kFp8ProductTolerance = 1e-3;

// Forward then backward in `format` on both backends, compared output by output.
void check_mixed_matmul(MatmulFormat format, Shape shape, bool with_bias, bool with_dinp) {
  const auto [N, C, OC] = shape;
  INFO("format " << static_cast<int>(format) << ", N=" << N << " C=" << C << " OC=" << OC
                 << (with_bias ? ", bias" : "") << (with_dinp ? ", dinp" : ""));
  BackendPair pair;
  const size_t inp_n = size_t(N) * C, w_n = size_t(OC) * C, out_n = size_t(N) * OC;
  Mirrored<float> inp(pair, random_floats(inp_n, 1)), w(pair, random_floats(w_n, 2));
  Mirrored<float> bias(pair, random_floats(size_t(OC), 3));
  Mirrored<float> dout(pair, random_floats(out_n, 4, -0.5f, 0.5f));
  Mirrored<float> out(pair, nan_filled(out_n)), dinp(pair, nan_filled(inp_n));
  Mirrored<float> dw(pair, random_floats(w_n, 5)), dbias(pair, random_floats(size_t(OC), 6));
  Fp8State fp8(pair);
  const double product_tolerance =
      format == MatmulFormat::fp8 ? kFp8ProductTolerance : kFp32Tolerance;
  MatmulPrecision cpu_precision, gpu_precision;
  cpu_precision.format = gpu_precision.format = format;
  if (format == MatmulFormat::fp8) {
    cpu_precision = fp8.cpu();
    gpu_precision = fp8.gpu();
  }

  pair.cpu->mixed_matmul_forward(out.cpu.data(), inp.cpu.data(), w.cpu.data(),
                                 with_bias ? bias.cpu.data() : nullptr, N, C, OC, cpu_precision);
  pair.gpu->mixed_matmul_forward(out.gpu.data(), inp.gpu.data(), w.gpu.data(),
                                 with_bias ? bias.gpu.data() : nullptr, N, C, OC, gpu_precision);
  DSEEK_CHECK_PARITY(out, product_tolerance);
  if (format == MatmulFormat::fp8) {
    check_amax_equal(fp8.inp, "forward: inp amax");
    check_amax_equal(fp8.weight, "forward: weight amax");
    CHECK(fp8.weight.amax.gpu_values().front() == 4.0f);  // raised only, never lowered
  }

  pair.cpu->mixed_matmul_backward(with_dinp ? dinp.cpu.data() : nullptr, dw.cpu.data(),
                                  with_bias ? dbias.cpu.data() : nullptr, dout.cpu.data(),
                                  inp.cpu.data(), w.cpu.data(), N, C, OC, cpu_precision);
  pair.gpu->mixed_matmul_backward(with_dinp ? dinp.gpu.data() : nullptr, dw.gpu.data(),
                                  with_bias ? dbias.gpu.data() : nullptr, dout.gpu.data(),
                                  inp.gpu.data(), w.gpu.data(), N, C, OC, gpu_precision);
  if (with_dinp) {
    DSEEK_CHECK_PARITY(dinp, product_tolerance);
  } else {
    CHECK(count_nan(dinp.gpu_values()) == inp_n);  // not asked for: left alone
  }
  DSEEK_CHECK_PARITY(dw, product_tolerance);
  DSEEK_CHECK_PARITY(dbias, kFp32Tolerance);
  if (format == MatmulFormat::fp8) {
    check_amax_equal(fp8.inp, "backward: inp amax");
    check_amax_equal(fp8.weight, "backward: weight amax");
    check_amax_equal(fp8.dout, "backward: dout amax");
    CHECK(fp8.dout.amax.gpu_values().front() > 0.4f);  // raised from 0 to max |dout|
  }
}

}  // namespace

TEST_CASE("bf16 mixed matmul forward and backward match the CPU backend", "[gpu][mixed]") {
  for (bool with_bias : {true, false}) {
    check_mixed_matmul(MatmulFormat::bf16, {64, 48, 80}, with_bias, true);
    // bf16 has no shape rule: odd sizes too.
    check_mixed_matmul(MatmulFormat::bf16, {37, 50, 29}, with_bias, true);
  }
  check_mixed_matmul(MatmulFormat::bf16, {37, 50, 29}, true, false);
}

TEST_CASE("fp8 mixed matmul forward and backward match the CPU backend on sm_90",
          "[gpu][mixed]") {
  if (!device_runs_fp8()) {
    BackendPair pair;
    Fp8State fp8(pair);
    Mirrored<float> inp(pair, random_floats(64 * 48, 1)), w(pair, random_floats(80 * 48, 2));
    Mirrored<float> out(pair, nan_filled(64 * 80));
    CHECK_THROWS_WITH(pair.gpu->mixed_matmul_forward(out.gpu.data(), inp.gpu.data(),
                                                     w.gpu.data(), nullptr, 64, 48, 80,
                                                     fp8.gpu()),
                      Catch::Contains("train.precision") && Catch::Contains("9.0"));
    return;
  }
  for (bool with_bias : {true, false})
    check_mixed_matmul(MatmulFormat::fp8, {64, 48, 80}, with_bias, true);
  check_mixed_matmul(MatmulFormat::fp8, {32, 16, 48}, true, false);
}

TEST_CASE("fp8 mixed matmul refuses shapes cuBLASLt's FP8 kernels do not take",
          "[gpu][mixed]") {
  BackendPair pair;
  Fp8State fp8(pair);
  const int N = 30, C = 48, OC = 80;  // N not a multiple of 16
  Mirrored<float> inp(pair, random_floats(size_t(N) * C, 1));
  Mirrored<float> w(pair, random_floats(size_t(OC) * C, 2));
  Mirrored<float> out(pair, nan_filled(size_t(N) * OC));
  // Before sm_90 the device check refuses first (the case above); either way the
  // message names the config key.
  CHECK_THROWS_WITH(pair.gpu->mixed_matmul_forward(out.gpu.data(), inp.gpu.data(), w.gpu.data(),
                                                   nullptr, N, C, OC, fp8.gpu()),
                    Catch::Contains("train.precision"));
  if (device_runs_fp8()) {
    CHECK_THROWS_AS(pair.gpu->mixed_matmul_forward(out.gpu.data(), inp.gpu.data(),
                                                   w.gpu.data(), nullptr, N, C, OC, fp8.gpu()),
                    std::invalid_argument);
    CHECK_THROWS_WITH(pair.gpu->mixed_matmul_forward(out.gpu.data(), inp.gpu.data(),
                                                     w.gpu.data(), nullptr, N, C, OC, fp8.gpu()),
                      Catch::Contains("multiples of 16"));
  }
  // Refused before anything ran: the amax is untouched.
  CHECK(fp8.inp.amax.gpu_values().front() == 0.25f);
}

namespace {
std::vector<float> bf16_values(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = numerics::bf16_to_fp32(bits[i]);
  return values;
}
}  // namespace

TEST_CASE("bf16 activations: LayerNorm and GELU with bf16 outputs, and matmuls on bf16 inputs, "
          "match the CPU backend", "[gpu][mixed][bf16]") {
  BackendPair pair;
  const int N = 37, C = 96, OC = 50;
  Mirrored<float> inp(pair, random_floats(size_t(N) * C, 61, -2.0f, 2.0f));
  Mirrored<float> gamma(pair, random_floats(size_t(C), 62)), beta(pair, random_floats(size_t(C), 63));
  Mirrored<uint16_t> norm(pair, std::vector<uint16_t>(size_t(N) * C, 0xffff));
  Mirrored<float> mean(pair, nan_filled(size_t(N))), rstd(pair, nan_filled(size_t(N)));
  pair.cpu->layernorm_forward_bf16(norm.cpu.data(), mean.cpu.data(), rstd.cpu.data(),
                                   inp.cpu.data(), gamma.cpu.data(), beta.cpu.data(), N, C);
  pair.gpu->layernorm_forward_bf16(norm.gpu.data(), mean.gpu.data(), rstd.gpu.data(),
                                   inp.gpu.data(), gamma.gpu.data(), beta.gpu.data(), N, C);
  // The fp32 values agree to 1e-5; rounded to bf16 a value may land one step (2^-8) apart.
  CHECK(relative_l2(bf16_values(norm.gpu_values()), bf16_values(norm.cpu_values())) < 1e-2);
  DSEEK_CHECK_PARITY(mean, kFp32Tolerance);
  DSEEK_CHECK_PARITY(rstd, kFp32Tolerance);

  const size_t n = size_t(N) * 4 * C + 5;
  Mirrored<float> x(pair, random_floats(n, 64, -4.0f, 4.0f));
  Mirrored<uint16_t> gelu(pair, std::vector<uint16_t>(n, 0xffff));
  pair.cpu->gelu_forward_bf16(gelu.cpu.data(), x.cpu.data(), n);
  pair.gpu->gelu_forward_bf16(gelu.gpu.data(), x.gpu.data(), n);
  CHECK(relative_l2(bf16_values(gelu.gpu_values()), bf16_values(gelu.cpu_values())) < 1e-2);

  // The same bf16 input on both sides: the products agree as fp32 accumulations do.
  Mirrored<uint16_t> input(pair, norm.cpu_values());
  Mirrored<float> w(pair, random_floats(size_t(OC) * C, 65)), bias(pair, random_floats(size_t(OC), 66));
  Mirrored<float> out(pair, nan_filled(size_t(N) * OC));
  pair.cpu->bf16_input_matmul_forward(out.cpu.data(), input.cpu.data(), w.cpu.data(),
                                      bias.cpu.data(), N, C, OC);
  pair.gpu->bf16_input_matmul_forward(out.gpu.data(), input.gpu.data(), w.gpu.data(),
                                      bias.gpu.data(), N, C, OC);
  DSEEK_CHECK_PARITY(out, kFp32Tolerance);
  Mirrored<float> dout(pair, random_floats(size_t(N) * OC, 67, -0.5f, 0.5f));
  Mirrored<float> dinp(pair, nan_filled(size_t(N) * C));
  Mirrored<float> dw(pair, random_floats(size_t(OC) * C, 68)), dbias(pair, random_floats(size_t(OC), 69));
  pair.cpu->bf16_input_matmul_backward(dinp.cpu.data(), dw.cpu.data(), dbias.cpu.data(),
                                       dout.cpu.data(), input.cpu.data(), w.cpu.data(), N, C, OC);
  pair.gpu->bf16_input_matmul_backward(dinp.gpu.data(), dw.gpu.data(), dbias.gpu.data(),
                                       dout.gpu.data(), input.gpu.data(), w.gpu.data(), N, C, OC);
  DSEEK_CHECK_PARITY(dinp, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dw, kFp32Tolerance);
  DSEEK_CHECK_PARITY(dbias, kFp32Tolerance);
}
