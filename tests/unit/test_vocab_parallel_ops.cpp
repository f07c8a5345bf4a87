// The backend's vocabulary-parallel ops (runtime/backend/backend.hpp, vocab_parallel_*):
// a tensor-parallel rank's halves of the embedding and the softmax cross-entropy, on its
// slice of the vocabulary. Each is checked against a serial reference:
//   - the embedding, forward and backward, against a plain host loop over the ids (a
//     copy and one add per element, so equality is the bound), and its slices summed
//     over the ranks against the whole-vocabulary encoder op, bitwise;
//   - the cross-entropy's three forward pieces, run for every rank with the group's
//     all-reduces done on the host, against the whole-vocabulary softmax_cross_entropy_
//     forward (float32, only the order of the sums of exponentials differs: probabilities
//     within 2e-6 relative, losses within 2e-6 of max(loss, 1)) and against float64
//     log-softmax (exp_approx's 2e-7 and float32 sums over 45 terms: within 1e-5 of
//     max(loss, 1); a loss near 0 is compared absolutely);
//   - its backward on each slice against the whole op on the same probabilities, bitwise.
// Odd sizes (V = 45 split 15 / 15 / 15 and an 11-row slice from id 7; C = 13; N = 21)
// and slices that do not start at 0. The scrambled test device runs every op with the
// CPU's bits, so the ops reach their buffers only as backend memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "support/random_values.hpp"

using dseek::backend::Backend;
using dseek::backend::DeviceBuffer;
using dseek::backend::VocabSlice;

namespace {

constexpr int kB = 3, kT = 7, kN = kB * kT, kC = 13, kVocab = 45;

std::vector<int32_t> ids(size_t n, int32_t bound, uint32_t seed) {
  std::vector<int32_t> values(n);
  uint32_t state = seed;
  for (int32_t& v : values) {
    state = state * 1664525u + 1013904223u;  // an LCG: reproducible on every platform
    v = static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(bound));
  }
  return values;
}

template <class T>
DeviceBuffer<T> upload(Backend& backend, const std::vector<T>& host) {
  DeviceBuffer<T> buffer(backend, host.size());
  backend.copy_from_host(buffer.data(), host.data(), host.size() * sizeof(T));
  return buffer;
}

template <class T>
std::vector<T> download(Backend& backend, const DeviceBuffer<T>& buffer) {
  std::vector<T> host(buffer.size());
  backend.copy_to_host(host.data(), buffer.data(), host.size() * sizeof(T));
  return host;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Rows [slice.begin, slice.begin + slice.rows) of a (rows, width) matrix.
std::vector<float> rows_of(const std::vector<float>& matrix, VocabSlice slice, int width) {
  return {matrix.begin() + static_cast<ptrdiff_t>(slice.begin) * width,
          matrix.begin() + static_cast<ptrdiff_t>(slice.begin + slice.rows) * width};
}

// Columns [slice.begin, slice.begin + slice.rows) of an (kN, kVocab) matrix.
std::vector<float> columns_of(const std::vector<float>& matrix, VocabSlice slice) {
  std::vector<float> part;
  for (int n = 0; n < kN; ++n)
    for (int j = 0; j < slice.rows; ++j)
      part.push_back(matrix[static_cast<size_t>(n) * kVocab + static_cast<size_t>(slice.begin + j)]);
  return part;
}

const std::vector<VocabSlice> kThreeRanks{{0, 15}, {15, 15}, {30, 15}};

// The whole vocabulary-parallel forward on `backend` for the ranks' slices of `logits`
// (kN, kVocab), the group's two sum all-reduces done here on the host in rank order:
// each rank's probabilities and the losses (every rank's copy, which must agree).
struct ParallelForward {
  std::vector<std::vector<float>> probs, losses;
};
ParallelForward parallel_forward(Backend& backend, const std::vector<float>& logits,
                                 const std::vector<int32_t>& targets,
                                 const std::vector<VocabSlice>& slices) {
  const int ranks = static_cast<int>(slices.size());
  const auto device_targets = upload(backend, targets);
  std::vector<DeviceBuffer<float>> shard, slots, sums;
  for (int r = 0; r < ranks; ++r) {
    shard.push_back(upload(backend, columns_of(logits, slices[static_cast<size_t>(r)])));
    slots.emplace_back(backend, static_cast<size_t>(kN * ranks));
    sums.emplace_back(backend, static_cast<size_t>(2 * kN));
  }
  // The all-reduce: every rank's buffer becomes the sum of all of them.
  auto all_reduce = [&](std::vector<DeviceBuffer<float>>& buffers) {
    std::vector<float> total(buffers.front().size(), 0.0f);
    for (auto& buffer : buffers) {
      const auto values = download(backend, buffer);
      for (size_t i = 0; i < total.size(); ++i) total[i] += values[i];
    }
    for (auto& buffer : buffers)
      backend.copy_from_host(buffer.data(), total.data(), total.size() * sizeof(float));
  };
  for (int r = 0; r < ranks; ++r)
    backend.vocab_parallel_logit_max(slots[static_cast<size_t>(r)].data(),
                                     shard[static_cast<size_t>(r)].data(),
                                     slices[static_cast<size_t>(r)], kN, r, ranks);
  all_reduce(slots);
  for (int r = 0; r < ranks; ++r)
    backend.vocab_parallel_exp_sums(shard[static_cast<size_t>(r)].data(),
                                    sums[static_cast<size_t>(r)].data(),
                                    slots[static_cast<size_t>(r)].data(), device_targets.data(),
                                    slices[static_cast<size_t>(r)], kN, ranks);
  all_reduce(sums);
  ParallelForward result;
  for (int r = 0; r < ranks; ++r) {
    DeviceBuffer<float> losses(backend, kN);
    backend.vocab_parallel_softmax_loss(shard[static_cast<size_t>(r)].data(), losses.data(),
                                        sums[static_cast<size_t>(r)].data(), kN,
                                        slices[static_cast<size_t>(r)].rows);
    result.probs.push_back(download(backend, shard[static_cast<size_t>(r)]));
    result.losses.push_back(download(backend, losses));
  }
  return result;
}

}  // namespace

TEST_CASE("vocabulary-parallel embedding: a slice holds its rows and zero elsewhere and "
          "the slices sum to the whole lookup", "[backend][tensor][vocab_parallel]") {
  auto cpu = dseek::backend::make_cpu_backend(2);
  const auto wte = dseek::testing::random_values(static_cast<size_t>(kVocab) * kC, 1, 1.0f);
  const auto wpe = dseek::testing::random_values(static_cast<size_t>(kT) * kC, 2, 1.0f);
  const auto tokens = ids(kN, kVocab, 3);
  const auto device_tokens = upload(*cpu, tokens);
  const auto device_wpe = upload(*cpu, wpe);

  std::vector<VocabSlice> slices = kThreeRanks;
  slices.push_back({7, 11});  // odd, not aligned to the others
  for (const VocabSlice slice : slices) {
    INFO("slice [" << slice.begin << ", " << slice.begin + slice.rows << ")");
    const auto device_wte = upload(*cpu, rows_of(wte, slice, kC));
    for (const bool with_positions : {false, true}) {
      INFO("wpe: " << with_positions);
      DeviceBuffer<float> out(*cpu, static_cast<size_t>(kN) * kC);
      cpu->vocab_parallel_encoder_forward(out.data(), device_tokens.data(), device_wte.data(),
                                          with_positions ? device_wpe.data() : nullptr, slice, kB,
                                          kT, kC);
      std::vector<float> expected(static_cast<size_t>(kN) * kC, 0.0f);
      for (int n = 0; n < kN; ++n)
        for (int c = 0; c < kC; ++c) {
          const int32_t token = tokens[static_cast<size_t>(n)];
          float value = slice.holds(token) ? wte[static_cast<size_t>(token) * kC + c] : 0.0f;
          if (with_positions) value += wpe[static_cast<size_t>(n % kT) * kC + c];
          expected[static_cast<size_t>(n) * kC + c] = value;
        }
      CHECK(same_bits(download(*cpu, out), expected));
    }

    // Backward accumulates into the slice's rows (held tokens only) and into wpe.
    const auto dout = dseek::testing::random_values(static_cast<size_t>(kN) * kC, 4, 1.0f);
    const auto start_dwte = dseek::testing::random_values(static_cast<size_t>(slice.rows) * kC, 5, 1.0f);
    const auto start_dwpe = dseek::testing::random_values(static_cast<size_t>(kT) * kC, 6, 1.0f);
    auto dwte = upload(*cpu, start_dwte);
    auto dwpe = upload(*cpu, start_dwpe);
    const auto device_dout = upload(*cpu, dout);
    cpu->vocab_parallel_encoder_backward(dwte.data(), dwpe.data(), device_dout.data(),
                                         device_tokens.data(), slice, kB, kT, kC);
    auto expected_dwte = start_dwte;
    auto expected_dwpe = start_dwpe;
    int held = 0;
    for (int n = 0; n < kN; ++n) {
      const int32_t token = tokens[static_cast<size_t>(n)];
      held += slice.holds(token) ? 1 : 0;
      for (int c = 0; c < kC; ++c) {
        const float g = dout[static_cast<size_t>(n) * kC + c];
        expected_dwpe[static_cast<size_t>(n % kT) * kC + c] += g;
        if (slice.holds(token))
          expected_dwte[static_cast<size_t>(token - slice.begin) * kC + c] += g;
      }
    }
    CHECK(held > 0);  // the slice is exercised ...
    CHECK(held < kN);  // ... and so is the skip
    CHECK(same_bits(download(*cpu, dwte), expected_dwte));
    CHECK(same_bits(download(*cpu, dwpe), expected_dwpe));
  }

  // Three ranks, the first adding the positions, summed in rank order (the group's
  // all-reduce): the whole-vocabulary encoder's bits, as only two summed values are
  // not zero.
  DeviceBuffer<float> whole_out(*cpu, static_cast<size_t>(kN) * kC);
  const auto device_whole_wte = upload(*cpu, wte);
  cpu->encoder_forward(whole_out.data(), device_tokens.data(), device_whole_wte.data(),
                       device_wpe.data(), kB, kT, kC);
  std::vector<float> summed(static_cast<size_t>(kN) * kC, 0.0f);
  for (size_t r = 0; r < kThreeRanks.size(); ++r) {
    const auto device_wte = upload(*cpu, rows_of(wte, kThreeRanks[r], kC));
    DeviceBuffer<float> out(*cpu, summed.size());
    cpu->vocab_parallel_encoder_forward(out.data(), device_tokens.data(), device_wte.data(),
                                        r == 0 ? device_wpe.data() : nullptr, kThreeRanks[r], kB,
                                        kT, kC);
    const auto part = download(*cpu, out);
    for (size_t i = 0; i < summed.size(); ++i) summed[i] += part[i];
  }
  CHECK(same_bits(summed, download(*cpu, whole_out)));
}

TEST_CASE("vocabulary-parallel cross-entropy: three ranks' pieces are the whole softmax "
          "cross-entropy", "[backend][tensor][vocab_parallel]") {
  auto cpu = dseek::backend::make_cpu_backend(2);
  // Wide logits, so the maximum matters (exp of 12 without it is still finite, but the
  // maxima differ per slice: the group's maximum must be the one used).
  const auto logits = dseek::testing::random_values(static_cast<size_t>(kN) * kVocab, 7, 4.0f);
  const auto targets = ids(kN, kVocab, 8);

  auto whole_logits = upload(*cpu, logits);
  const auto device_targets = upload(*cpu, targets);
  DeviceBuffer<float> whole_losses(*cpu, kN);
  cpu->softmax_cross_entropy_forward(whole_logits.data(), whole_losses.data(),
                                     device_targets.data(), kN, kVocab);
  const auto whole_probs = download(*cpu, whole_logits);
  const auto reference_losses = download(*cpu, whole_losses);

  const ParallelForward parallel = parallel_forward(*cpu, logits, targets, kThreeRanks);
  for (size_t r = 0; r < kThreeRanks.size(); ++r) {
    INFO("rank " << r);
    // Every rank holds every token's loss, bitwise the same (the all-reduced sums).
    CHECK(same_bits(parallel.losses[r], parallel.losses[0]));
    const auto expected = columns_of(whole_probs, kThreeRanks[r]);
    double worst = 0.0;
    for (size_t i = 0; i < expected.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(parallel.probs[r][i]) - expected[i]) /
                                  static_cast<double>(expected[i]));
    CHECK(worst <= 2e-6);
  }
  double worst_loss = 0.0, worst_exact = 0.0;
  for (int n = 0; n < kN; ++n) {
    const double got = parallel.losses[0][static_cast<size_t>(n)];
    const double reference = reference_losses[static_cast<size_t>(n)];
    worst_loss = std::max(worst_loss, std::abs(got - reference) / std::max(reference, 1.0));
    // float64 log-softmax of the same logits.
    const float* row = logits.data() + static_cast<size_t>(n) * kVocab;
    const double max_value = *std::max_element(row, row + kVocab);
    double total = 0.0;
    for (int j = 0; j < kVocab; ++j) total += std::exp(static_cast<double>(row[j]) - max_value);
    const double exact =
        std::log(total) - (static_cast<double>(row[targets[static_cast<size_t>(n)]]) - max_value);
    worst_exact = std::max(worst_exact, std::abs(got - exact) / std::max(exact, 1.0));
  }
  CHECK(worst_loss <= 2e-6);
  CHECK(worst_exact <= 1e-5);

  // Backward on each slice of the same probabilities: the whole op's dlogits, bitwise
  // (the one-hot subtracted where the target is held, nowhere else).
  const float dloss = 1.0f / static_cast<float>(kN);
  cpu->softmax_cross_entropy_backward(whole_logits.data(), device_targets.data(), kN, kVocab, dloss);
  const auto whole_dlogits = download(*cpu, whole_logits);
  for (const VocabSlice slice : kThreeRanks) {
    INFO("slice from " << slice.begin);
    auto probs = upload(*cpu, columns_of(whole_probs, slice));
    cpu->vocab_parallel_cross_entropy_backward(probs.data(), device_targets.data(), slice, kN, dloss);
    CHECK(same_bits(download(*cpu, probs), columns_of(whole_dlogits, slice)));
  }
}

TEST_CASE("vocabulary-parallel cross-entropy with one rank is the fused op",
          "[backend][tensor][vocab_parallel]") {
  // One slice holding the whole vocabulary: the same loops as the fused forward, so the
  // same values up to the order of the float sum of exponentials, which the compiler may
  // vectorize differently in two functions: within 1e-6 relative (probabilities) and
  // 1e-6 of max(loss, 1).
  auto cpu = dseek::backend::make_cpu_backend(1);
  const auto logits = dseek::testing::random_values(static_cast<size_t>(kN) * kVocab, 9, 3.0f);
  const auto targets = ids(kN, kVocab, 10);
  auto whole_logits = upload(*cpu, logits);
  const auto device_targets = upload(*cpu, targets);
  DeviceBuffer<float> whole_losses(*cpu, kN);
  cpu->softmax_cross_entropy_forward(whole_logits.data(), whole_losses.data(),
                                     device_targets.data(), kN, kVocab);
  const ParallelForward one =
      parallel_forward(*cpu, logits, targets, {VocabSlice::whole(kVocab)});
  const auto probs = download(*cpu, whole_logits);
  const auto losses = download(*cpu, whole_losses);
  for (size_t i = 0; i < probs.size(); ++i)
    REQUIRE(std::abs(one.probs[0][i] - probs[i]) <= 1e-6f * probs[i]);
  for (size_t i = 0; i < losses.size(); ++i)
    REQUIRE(std::abs(one.losses[0][i] - losses[i]) <= 1e-6f * std::max(losses[i], 1.0f));
}

TEST_CASE("vocabulary-parallel ops on the scrambled device give the CPU's bits",
          "[backend][tensor][vocab_parallel][scrambled]") {
  auto cpu = dseek::backend::make_cpu_backend(2);
  auto scrambled = dseek::backend::make_scrambled_backend(2);
  const auto logits = dseek::testing::random_values(static_cast<size_t>(kN) * kVocab, 11, 4.0f);
  const auto targets = ids(kN, kVocab, 12);
  const ParallelForward on_cpu = parallel_forward(*cpu, logits, targets, kThreeRanks);
  const ParallelForward on_device = parallel_forward(*scrambled, logits, targets, kThreeRanks);
  for (size_t r = 0; r < kThreeRanks.size(); ++r) {
    INFO("rank " << r);
    CHECK(same_bits(on_device.probs[r], on_cpu.probs[r]));
    CHECK(same_bits(on_device.losses[r], on_cpu.losses[r]));
  }

  const VocabSlice slice{15, 15};
  const auto tokens = ids(kN, kVocab, 13);
  const auto wte = dseek::testing::random_values(static_cast<size_t>(slice.rows) * kC, 14, 1.0f);
  const auto wpe = dseek::testing::random_values(static_cast<size_t>(kT) * kC, 15, 1.0f);
  const auto dout = dseek::testing::random_values(static_cast<size_t>(kN) * kC, 16, 1.0f);
  const float dloss = 0.25f;
  auto run = [&](Backend& backend) {
    const auto device_tokens = upload(backend, tokens);
    const auto device_wte = upload(backend, wte);
    const auto device_wpe = upload(backend, wpe);
    const auto device_dout = upload(backend, dout);
    DeviceBuffer<float> out(backend, static_cast<size_t>(kN) * kC);
    backend.vocab_parallel_encoder_forward(out.data(), device_tokens.data(), device_wte.data(),
                                           device_wpe.data(), slice, kB, kT, kC);
    auto dwte = upload(backend, wte);  // accumulated into: any start values
    auto dwpe = upload(backend, wpe);
    backend.vocab_parallel_encoder_backward(dwte.data(), dwpe.data(), device_dout.data(),
                                            device_tokens.data(), slice, kB, kT, kC);
    const auto device_targets = upload(backend, targets);
    auto probs = upload(backend, on_cpu.probs[1]);
    backend.vocab_parallel_cross_entropy_backward(probs.data(), device_targets.data(), slice, kN,
                                                  dloss);
    return std::vector<std::vector<float>>{download(backend, out), download(backend, dwte),
                                           download(backend, dwpe), download(backend, probs)};
  };
  const auto expected = run(*cpu);
  const auto got = run(*scrambled);
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i << " (out, dwte, dwpe, dlogits)");
    CHECK(same_bits(got[i], expected[i]));
  }
}

// model.vocab padding the data's vocabulary (llm.c's V within Vp): the last ids of the
// vocabulary are padding, which the slices mark (VocabSlice::padded). Their logits take
// no part in the softmax: the probabilities and the losses are those of a float64
// log-softmax over the first kReal logits (within 1e-5, as above), the padded
// probabilities and logit gradients are exactly 0, every rank holds the same losses.
// The layouts: one rank (the whole model with a padded vocabulary), three ranks with
// the padding in the last, and three where the last holds padding only.
TEST_CASE("vocabulary-parallel cross-entropy: padded ids take no part in the softmax",
          "[backend][tensor][vocab_parallel][padded_vocab]") {
  auto cpu = dseek::backend::make_cpu_backend(2);
  const auto logits = dseek::testing::random_values(static_cast<size_t>(kN) * kVocab, 17, 4.0f);
  for (const int real : {38, 30}) {
    const auto targets = ids(kN, real, 18);
    std::vector<std::vector<VocabSlice>> layouts = {{{0, kVocab, kVocab - real}}};
    std::vector<VocabSlice> three;
    for (VocabSlice slice : kThreeRanks) {
      slice.padded = slice.rows - std::clamp(real - slice.begin, 0, slice.rows);
      three.push_back(slice);
    }
    layouts.push_back(three);
    for (const auto& slices : layouts) {
      INFO("real vocabulary " << real << " of " << kVocab << ", " << slices.size() << " rank(s)");
      const ParallelForward parallel = parallel_forward(*cpu, logits, targets, slices);
      double worst_loss = 0.0, worst_prob = 0.0;
      size_t padded_nonzero = 0;
      for (int n = 0; n < kN; ++n) {
        const float* row = logits.data() + static_cast<size_t>(n) * kVocab;
        const double max_value = *std::max_element(row, row + real);
        double total = 0.0;
        for (int j = 0; j < real; ++j) total += std::exp(row[j] - max_value);
        const int32_t target = targets[static_cast<size_t>(n)];
        const double exact = std::log(total) - (row[target] - max_value);
        for (size_t r = 0; r < slices.size(); ++r)
          CHECK(parallel.losses[r][static_cast<size_t>(n)] == parallel.losses[0][static_cast<size_t>(n)]);
        worst_loss = std::max(worst_loss, std::abs(parallel.losses[0][static_cast<size_t>(n)] - exact) /
                                              std::max(exact, 1.0));
        for (size_t r = 0; r < slices.size(); ++r) {
          const VocabSlice s = slices[r];
          for (int j = 0; j < s.rows; ++j) {
            const float p = parallel.probs[r][static_cast<size_t>(n) * s.rows + static_cast<size_t>(j)];
            const int id = s.begin + j;
            if (id >= real) {
              padded_nonzero += p != 0.0f;
              continue;
            }
            const double expected = std::exp(row[id] - max_value) / total;
            worst_prob = std::max(worst_prob, std::abs(p - expected) / expected);
          }
        }
      }
      CHECK(padded_nonzero == 0);
      CHECK(worst_loss <= 1e-5);
      CHECK(worst_prob <= 1e-5);
      // Backward: (p - onehot) * dloss, so 0 at every padded id.
      const auto device_targets = upload(*cpu, targets);
      for (size_t r = 0; r < slices.size(); ++r) {
        auto probs = upload(*cpu, parallel.probs[r]);
        cpu->vocab_parallel_cross_entropy_backward(probs.data(), device_targets.data(), slices[r],
                                                   kN, 0.25f);
        const auto grads = download(*cpu, probs);
        size_t nonzero = 0;
        for (int n = 0; n < kN; ++n)
          for (int j = slices[r].real_rows(); j < slices[r].rows; ++j)
            nonzero += grads[static_cast<size_t>(n) * slices[r].rows + static_cast<size_t>(j)] != 0.0f;
        CHECK(nonzero == 0);
      }
    }
  }
}
