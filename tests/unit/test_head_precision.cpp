// The GPT head's matmul (logits = lnf @ wte^T, tied to the embedding) under each
// train.precision (runtime/model/precision_policy.hpp: fp32 under "fp32", bf16 under
// "bf16" and "fp8"). A model that is only the head (layer range [L, L]: final LayerNorm,
// logits, cross-entropy) is run on a given input, and its loss, the gradient of its
// input and its parameter gradients are compared with the same ops called one by one:
//   fp32: the plain matmul_forward / matmul_backward the head used before it followed the
//         policy, bit for bit (the fp32 path is untouched);
//   bf16: mixed_matmul_forward / mixed_matmul_backward in MatmulFormat::bf16, bit for bit;
//   fp8:  the bf16 model's bits (the head is never FP8).
// The op sequence's logits are then checked against a float64 reference: with lnf and
// wte rounded to bf16 they agree within fp32 accumulation of C exact products (bound
// C * 2^-24 of the sum of |products|, as tests/unit/test_mixed_matmul.cpp), and with the
// fp32 operands they do not (measured here: 3067 of the 3072 logits are outside that
// bound, relative L2 distance 2.4e-3, the size of bf16's 2^-9 rounding; to the bf16
// reference 3.5e-8). The scrambled test
// device (train.device "scrambled-cpu-for-tests") gives the CPU's bits.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/numerics/bf16.hpp"
#include "support/random_values.hpp"
#include "support/small_gpt.hpp"

using namespace dseek;
using backend::MatmulFormat;

namespace {
const model::GptShape kShape{.dim = 32, .layers = 1, .heads = 2, .context = 16, .vocab = 96};
constexpr int64_t kBatch = 2;
constexpr int kThreads = 2;
constexpr int N = static_cast<int>(kBatch * 16), C = 32, V = 96;

// The head's inputs: every parameter (only lnf and wte are read), the residual stream
// that enters the final LayerNorm, and the targets.
struct HeadInput {
  std::vector<float> params, x;
  std::vector<int32_t> targets;
};

HeadInput make_input() {
  const model::ParamLayout layout(kShape);
  HeadInput in;
  // Logits of a few units, so that the softmax is far from uniform and the bf16 rounding
  // of the operands shows in every probability.
  in.params = testing::random_values(layout.total(), 3, 0.3f);
  for (size_t i = 0; i < static_cast<size_t>(C); ++i) in.params[layout.lnf_w() + i] += 1.0f;
  in.x = testing::random_values(static_cast<size_t>(N) * C, 4, 1.0f);
  in.targets = testing::random_batch(kBatch, kShape.context, kShape.vocab, 5).targets;
  return in;
}

struct HeadResult {
  double loss = 0;
  std::vector<float> dx, grads;
  std::vector<float> lnf, logits;  // the op sequence's only
};

constexpr float kDloss = 1.0f / N;

HeadResult run_head_model(backend::Backend& be, MatmulFormat format, const HeadInput& in) {
  model::GptModel m(kShape, {kShape.layers, kShape.layers}, be, kBatch);
  m.set_precision(model::PrecisionPolicy(be, format, kShape.layers));
  be.copy_from_host(m.params(), in.params.data(), in.params.size() * sizeof(float));
  be.copy_from_host(m.stage_input(), in.x.data(), in.x.size() * sizeof(float));
  m.zero_grads();
  HeadResult r;
  // A range without the embedding reads no tokens.
  r.loss = m.forward(in.targets.data(), in.targets.data(), kBatch, kShape.context);
  m.backward(kDloss);
  r.grads.resize(m.num_params());
  be.copy_to_host(r.grads.data(), m.grads(), r.grads.size() * sizeof(float));
  r.dx.resize(in.x.size());
  be.copy_to_host(r.dx.data(), m.stage_input_grad(), r.dx.size() * sizeof(float));
  return r;
}

// The head's ops one by one on the CPU backend (host memory), with the matmul in
// `head`: fp32 through the plain matmul_forward / matmul_backward, bf16 through the
// mixed ones.
HeadResult run_head_ops(MatmulFormat head, const HeadInput& in) {
  auto be = backend::make_cpu_backend(kThreads);
  const model::ParamLayout layout(kShape);
  const float* w = in.params.data();
  HeadResult r;
  r.grads.assign(layout.total(), 0.0f);
  r.dx.assign(in.x.size(), 0.0f);
  r.lnf.resize(in.x.size());
  std::vector<float> mean(N), rstd(N), logits(static_cast<size_t>(N) * V), losses(N),
      dlnf(in.x.size());
  float* g = r.grads.data();
  backend::MatmulPrecision precision;
  precision.format = head;
  be->layernorm_forward(r.lnf.data(), mean.data(), rstd.data(), in.x.data(), w + layout.lnf_w(),
                        w + layout.lnf_b(), N, C);
  if (head == MatmulFormat::fp32)
    be->matmul_forward(logits.data(), r.lnf.data(), w + layout.wte(), nullptr, N, C, V);
  else
    be->mixed_matmul_forward(logits.data(), r.lnf.data(), w + layout.wte(), nullptr, N, C, V,
                             precision);
  r.logits = logits;
  be->softmax_cross_entropy_forward(logits.data(), losses.data(), in.targets.data(), N, V);
  r.loss = be->sum(losses.data(), losses.size()) / N;
  be->softmax_cross_entropy_backward(logits.data(), in.targets.data(), N, V, kDloss);
  if (head == MatmulFormat::fp32)
    be->matmul_backward(dlnf.data(), g + layout.wte(), nullptr, logits.data(), r.lnf.data(),
                        w + layout.wte(), N, C, V);
  else
    be->mixed_matmul_backward(dlnf.data(), g + layout.wte(), nullptr, logits.data(),
                              r.lnf.data(), w + layout.wte(), N, C, V, precision);
  be->layernorm_backward(r.dx.data(), g + layout.lnf_w(), g + layout.lnf_b(), dlnf.data(),
                         in.x.data(), w + layout.lnf_w(), mean.data(), rstd.data(), N, C);
  return r;
}

bool same_bits(const HeadResult& a, const HeadResult& b) {
  return std::memcmp(&a.loss, &b.loss, sizeof(double)) == 0 && a.dx == b.dx &&
         a.grads == b.grads;
}

// logits (N, V) = lnf @ wte^T in float64 on the operands as given, and each one's sum of
// |products|.
struct ReferenceLogits {
  std::vector<double> logits, magnitude;
};

ReferenceLogits reference_logits(std::vector<float> lnf, std::vector<float> wte, bool bf16) {
  if (bf16) {
    numerics::round_to_bf16(lnf.data(), lnf.data(), lnf.size());
    numerics::round_to_bf16(wte.data(), wte.data(), wte.size());
  }
  ReferenceLogits r;
  r.logits.assign(static_cast<size_t>(N) * V, 0.0);
  r.magnitude.assign(r.logits.size(), 0.0);
  for (size_t n = 0; n < static_cast<size_t>(N); ++n)
    for (size_t v = 0; v < static_cast<size_t>(V); ++v)
      for (size_t c = 0; c < static_cast<size_t>(C); ++c) {
        const double t = double{lnf[n * C + c]} * wte[v * C + c];
        r.logits[n * V + v] += t;
        r.magnitude[n * V + v] += std::fabs(t);
      }
  return r;
}

// The logits outside the fp32-accumulation bound of `reference`, and the relative L2
// distance to it.
struct Distance {
  size_t outside = 0;
  double relative_l2 = 0;
};

Distance distance(const std::vector<float>& logits, const ReferenceLogits& reference) {
  const double bound = C * std::ldexp(1.0, -24);
  Distance d;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = logits[i] - reference.logits[i];
    if (std::fabs(e) > bound * reference.magnitude[i]) ++d.outside;
    diff += e * e;
    norm += reference.logits[i] * reference.logits[i];
  }
  d.relative_l2 = std::sqrt(diff / norm);
  return d;
}
}  // namespace

TEST_CASE("head precision: fp32 under fp32, bf16 under bf16 and fp8, no fp8 scaling",
          "[model][precision]") {
  auto be = backend::make_cpu_backend(1);
  const auto head_of = [&](MatmulFormat format) {
    return model::PrecisionPolicy(*be, format, kShape.layers).head();
  };
  CHECK(model::PrecisionPolicy().head().format == MatmulFormat::fp32);
  CHECK(head_of(MatmulFormat::fp32).format == MatmulFormat::fp32);
  CHECK(head_of(MatmulFormat::bf16).format == MatmulFormat::bf16);
  const backend::MatmulPrecision fp8_head = head_of(MatmulFormat::fp8);
  CHECK(fp8_head.format == MatmulFormat::bf16);
  CHECK(fp8_head.inp.scale == nullptr);
  CHECK(fp8_head.weight.scale == nullptr);
  CHECK(fp8_head.dout.scale == nullptr);
}

TEST_CASE("head precision: the head's logits, loss and gradients are the plain fp32 ops' "
          "under fp32 and bf16 ops' under bf16 and fp8",
          "[model][precision]") {
  const HeadInput in = make_input();
  auto cpu = backend::make_cpu_backend(kThreads);
  const HeadResult fp32 = run_head_model(*cpu, MatmulFormat::fp32, in);
  const HeadResult bf16 = run_head_model(*cpu, MatmulFormat::bf16, in);
  const HeadResult fp8 = run_head_model(*cpu, MatmulFormat::fp8, in);
  const HeadResult fp32_ops = run_head_ops(MatmulFormat::fp32, in);
  const HeadResult bf16_ops = run_head_ops(MatmulFormat::bf16, in);

  CHECK(same_bits(fp32, fp32_ops));
  CHECK(same_bits(bf16, bf16_ops));
  CHECK(same_bits(fp8, bf16));
  CHECK(fp32.loss != bf16.loss);
  CHECK(fp32.grads != bf16.grads);
  CHECK(fp32.dx != bf16.dx);

  // What the bf16 ops computed: the logits of bf16-rounded lnf and wte, fp32 accumulate.
  const model::ParamLayout layout(kShape);
  const auto wte_begin = in.params.begin() + static_cast<std::ptrdiff_t>(layout.wte());
  const std::vector<float> wte(wte_begin, wte_begin + static_cast<std::ptrdiff_t>(V) * C);
  REQUIRE(bf16_ops.lnf == fp32_ops.lnf);
  const Distance to_bf16 = distance(bf16_ops.logits, reference_logits(bf16_ops.lnf, wte, true));
  const Distance to_fp32 = distance(bf16_ops.logits, reference_logits(bf16_ops.lnf, wte, false));
  const Distance fp32_to_fp32 =
      distance(fp32_ops.logits, reference_logits(fp32_ops.lnf, wte, false));
  WARN("bf16 head logits vs the bf16-operand reference: " << to_bf16.outside << " of " << N * V
       << " outside the fp32-accumulation bound, relative L2 " << to_bf16.relative_l2
       << "; vs the fp32-operand reference: " << to_fp32.outside << " outside, relative L2 "
       << to_fp32.relative_l2);
  CHECK(to_bf16.outside == 0);
  CHECK(fp32_to_fp32.outside == 0);
  CHECK(to_fp32.outside > static_cast<size_t>(N * V) / 2);
  CHECK(to_fp32.relative_l2 > 1e-4);
  CHECK(to_fp32.relative_l2 < 1e-2);
}

TEST_CASE("head precision: the bf16 head on the scrambled test device has the CPU's bits",
          "[model][precision][scrambled]") {
  const HeadInput in = make_input();
  auto cpu = backend::make_cpu_backend(kThreads);
  auto scrambled = backend::make_scrambled_backend(kThreads);
  for (const MatmulFormat format : {MatmulFormat::fp32, MatmulFormat::bf16}) {
    INFO("train.precision " << model::name_of(format));
    CHECK(same_bits(run_head_model(*scrambled, format, in), run_head_model(*cpu, format, in)));
  }
}
