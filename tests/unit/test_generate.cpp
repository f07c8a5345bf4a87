// Generation (runtime/infer/): the KV-cache decoder against the training model, greedy
// decoding with the cache against an argmax loop over full forward passes, the
// sampler's settings, and the stops (max tokens, end of text, the context).
//
// Tolerances: the decoder and GptModel run the same fp32 ops in other shapes (sgemm on
// n rows instead of B*T, attention blocks of another size), so they differ by fp32
// rounding: the mean loss within 1e-5 relative, logits of the same position computed
// in different chunks within 1e-5 of the largest |logit|. Greedy tokens must be equal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/write.hpp"
#include "runtime/config/load.hpp"
#include "runtime/infer/checkpoint_model.hpp"
#include "runtime/infer/decoder.hpp"
#include "runtime/infer/generate.hpp"
#include "runtime/infer/sampler.hpp"
#include "runtime/model/gpt_model.hpp"
#include "support/small_gpt.hpp"
#include "support/test_paths.hpp"

using dseek::infer::Decoder;
using dseek::infer::GenerateSettings;
using dseek::infer::StopReason;
using dseek::model::GptModel;
using dseek::model::GptShape;

namespace {

// Context 96 > the attention's 64-row blocks, so prefill crosses a block boundary.
const GptShape kShape{.dim = 64, .layers = 2, .heads = 4, .context = 96, .vocab = 256};

struct SmallModel {
  std::unique_ptr<dseek::backend::Backend> backend = dseek::backend::make_cpu_backend(2);
  GptModel model{kShape, {0, kShape.layers}, *backend, 1};
  SmallModel() {
    // A larger init than GPT-2's 0.02 so that the logits are far from ties.
    dseek::testing::init_nontrivial(model, 5, 0.1);
  }
  std::span<const float> params() { return {model.params(), model.num_params()}; }
};

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  auto batch = dseek::testing::random_batch(1, static_cast<int64_t>(n), kShape.vocab, seed);
  return batch.tokens;
}

}  // namespace

TEST_CASE("generate: the decoder's logits give the training model's loss", "[generate]") {
  SmallModel small;
  auto batch = dseek::testing::random_batch(1, kShape.context, kShape.vocab, 3);
  const double loss = small.model.forward(batch.tokens.data(), batch.targets.data(), 1,
                                          kShape.context);
  Decoder decoder(kShape, *small.backend, small.params());
  const std::vector<float> logits = decoder.append(batch.tokens, true);
  REQUIRE(logits.size() == static_cast<size_t>(kShape.context * kShape.vocab));
  double total = 0.0;
  for (int64_t t = 0; t < kShape.context; ++t) {
    const float* row = logits.data() + t * kShape.vocab;
    const double top = *std::max_element(row, row + kShape.vocab);
    double sum = 0.0;
    for (int64_t v = 0; v < kShape.vocab; ++v) sum += std::exp(row[v] - top);
    total += std::log(sum) + top - row[batch.targets[static_cast<size_t>(t)]];
  }
  const double decoder_loss = total / static_cast<double>(kShape.context);
  INFO("GptModel " << loss << ", decoder " << decoder_loss);
  CHECK(std::abs(decoder_loss - loss) / loss < 1e-5);
}

TEST_CASE("generate: logits through the KV cache match one full forward", "[generate]") {
  SmallModel small;
  const auto tokens = random_tokens(static_cast<size_t>(kShape.context), 11);
  Decoder full(kShape, *small.backend, small.params());
  const std::vector<float> reference = full.append(tokens, true);
  float largest = 0.0f;
  for (float v : reference) largest = std::max(largest, std::abs(v));

  // In chunks: 10 tokens, 70 (crossing the 64-row block), then one at a time.
  Decoder cached(kShape, *small.backend, small.params());
  std::vector<float> chunked;
  size_t at = 0;
  for (size_t chunk : {size_t{10}, size_t{70}}) {
    const auto& rows = cached.append(std::span(tokens).subspan(at, chunk), true);
    chunked.insert(chunked.end(), rows.begin(), rows.end());
    at += chunk;
  }
  for (; at < tokens.size(); ++at) {
    const auto& row = cached.append(std::span(tokens).subspan(at, 1));
    chunked.insert(chunked.end(), row.begin(), row.end());
  }
  CHECK(cached.position() == kShape.context);
  REQUIRE(chunked.size() == reference.size());
  double worst = 0.0;
  for (size_t i = 0; i < reference.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(chunked[i] - reference[i])));
  INFO("max |difference| " << worst << ", max |logit| " << largest);
  CHECK(worst <= 1e-5 * largest);
  // Past the context is refused.
  CHECK_THROWS_WITH(cached.append(std::span(tokens).first(1)),
                    Catch::Contains("exceed the context of 96"));
}

TEST_CASE("generate: greedy decoding with the KV cache gives the tokens of full forwards",
          "[generate]") {
  SmallModel small;
  Decoder decoder(kShape, *small.backend, small.params());
  Decoder full(kShape, *small.backend, small.params());
  std::vector<int32_t> all;
  for (uint32_t seed : {21u, 22u, 23u}) {
    const auto prompt = random_tokens(5, seed);
    GenerateSettings settings;
    settings.max_tokens = 80;  // 5 + 80 positions: past the attention's first 64-row block
    settings.sampling.temperature = 0.0;
    std::vector<int32_t> streamed;
    const auto result = dseek::infer::generate(decoder, prompt, settings,
                                               [&](int32_t token) { streamed.push_back(token); });
    CHECK(result.stop == StopReason::max_tokens);
    CHECK(result.tokens.size() == 80);
    CHECK(streamed == result.tokens);
    CHECK(result.decode_steps == 79);

    // The reference: the whole sequence again through one forward per token, no cache.
    std::vector<int32_t> sequence = prompt;
    std::vector<int32_t> expected;
    for (int i = 0; i < 80; ++i) {
      full.reset();
      const int32_t next = dseek::infer::argmax(full.append(sequence));
      expected.push_back(next);
      sequence.push_back(next);
    }
    CHECK(result.tokens == expected);
    all.insert(all.end(), expected.begin(), expected.end());
  }
  // A random model's greedy text soon repeats itself; the three texts together still
  // hold more than a few ids (the comparison would show little on one repeated id).
  std::sort(all.begin(), all.end());
  CHECK(std::unique(all.begin(), all.end()) - all.begin() > 5);
}

TEST_CASE("generate: a fixed seed gives the same tokens, another seed others", "[generate]") {
  SmallModel small;
  const auto prompt = random_tokens(4, 31);
  Decoder decoder(kShape, *small.backend, small.params());
  GenerateSettings settings;
  settings.max_tokens = 40;
  settings.sampling = {.temperature = 0.9, .top_k = 40, .top_p = 0.95, .seed = 7};
  const auto first = dseek::infer::generate(decoder, prompt, settings).tokens;
  const auto again = dseek::infer::generate(decoder, prompt, settings).tokens;
  CHECK(first == again);
  settings.sampling.seed = 8;
  CHECK(dseek::infer::generate(decoder, prompt, settings).tokens != first);
}

TEST_CASE("generate: the stops: end of text, the context, a prompt too long", "[generate]") {
  SmallModel small;
  Decoder decoder(kShape, *small.backend, small.params());
  GenerateSettings greedy;
  greedy.sampling.temperature = 0.0;
  greedy.max_tokens = 3;
  const auto prompt = random_tokens(6, 41);
  const auto plain = dseek::infer::generate(decoder, prompt, greedy);
  REQUIRE(plain.tokens.size() == 3);

  // The end-of-text token ends the text and is not part of it.
  GenerateSettings eot = greedy;
  eot.max_tokens = 100;
  const bool second_differs = plain.tokens[0] != plain.tokens[1];
  eot.end_of_text = plain.tokens[second_differs ? 1 : 0];
  const auto stopped = dseek::infer::generate(decoder, prompt, eot);
  CHECK(stopped.stop == StopReason::end_of_text);
  CHECK(stopped.tokens == (second_differs ? std::vector<int32_t>{plain.tokens[0]}
                                          : std::vector<int32_t>{}));

  // The prompt and the text together fill the context, no more.
  GenerateSettings many = greedy;
  many.max_tokens = 1000;
  const auto filled = dseek::infer::generate(decoder, prompt, many);
  CHECK(filled.stop == StopReason::context);
  CHECK(filled.tokens.size() == static_cast<size_t>(kShape.context) - prompt.size());
  const auto longest = random_tokens(static_cast<size_t>(kShape.context) - 1, 43);
  const auto one = dseek::infer::generate(decoder, longest, many);
  CHECK(one.tokens.size() == 1);
  CHECK(one.stop == StopReason::context);

  const auto too_long = random_tokens(static_cast<size_t>(kShape.context), 42);
  CHECK_THROWS_AS(dseek::infer::generate(decoder, too_long, greedy),
                  dseek::infer::PromptTooLong);
  CHECK_THROWS_WITH(dseek::infer::generate(decoder, too_long, greedy),
                    Catch::Contains("the prompt is 96 tokens and the model's context is 96") &&
                        Catch::Contains("at most 95 tokens"));
}

TEST_CASE("generate: temperature, top-k and top-p sample what they should", "[generate]") {
  using dseek::infer::Sampler;
  // Probabilities 0.5, 0.25, 0.15, 0.1 at ids 2, 0, 3, 1.
  const std::vector<float> logits = {std::log(0.25f), std::log(0.1f), std::log(0.5f),
                                     std::log(0.15f)};
  auto counts = [&](dseek::infer::SamplingSettings s, int draws) {
    Sampler sampler(s);
    std::map<int32_t, int> seen;
    for (int i = 0; i < draws; ++i) ++seen[sampler.next(logits)];
    return seen;
  };
  // Temperature 1: the softmax itself. 20000 draws: a frequency's standard deviation is
  // at most 0.0036; 0.02 is over 5 of them.
  const auto all = counts({.temperature = 1.0, .seed = 1}, 20000);
  CHECK(std::abs(all.at(2) / 20000.0 - 0.5) < 0.02);
  CHECK(std::abs(all.at(0) / 20000.0 - 0.25) < 0.02);
  CHECK(std::abs(all.at(3) / 20000.0 - 0.15) < 0.02);
  CHECK(std::abs(all.at(1) / 20000.0 - 0.1) < 0.02);
  // top-k 2: ids 2 and 0 only, renormalised to 2/3 and 1/3.
  const auto top2 = counts({.temperature = 1.0, .top_k = 2, .seed = 2}, 20000);
  CHECK(top2.size() == 2);
  CHECK(std::abs(top2.at(2) / 20000.0 - 2.0 / 3.0) < 0.02);
  // top-p 0.7: 0.5 + 0.25 reaches it, so ids 2 and 0.
  const auto nucleus = counts({.temperature = 1.0, .top_p = 0.7, .seed = 3}, 5000);
  CHECK(nucleus.size() == 2);
  CHECK(nucleus.count(2) == 1);
  CHECK(nucleus.count(0) == 1);
  // top-k 1, a tiny top-p and temperature 0 are all greedy.
  CHECK(counts({.temperature = 1.0, .top_k = 1, .seed = 4}, 200) == std::map<int32_t, int>{{2, 200}});
  CHECK(counts({.temperature = 1.0, .top_p = 0.01, .seed = 5}, 200) == std::map<int32_t, int>{{2, 200}});
  CHECK(counts({.temperature = 0.0, .seed = 6}, 10) == std::map<int32_t, int>{{2, 10}});
  // A low temperature sharpens: 0.5 : 0.25 becomes 0.5^4 : 0.25^4 at T = 0.25.
  const auto sharp = counts({.temperature = 0.25, .seed = 7}, 20000);
  const double p2 = std::pow(0.5, 4), p0 = std::pow(0.25, 4), p3 = std::pow(0.15, 4),
               p1 = std::pow(0.1, 4);
  CHECK(std::abs(sharp.at(2) / 20000.0 - p2 / (p0 + p1 + p2 + p3)) < 0.02);
  CHECK_THROWS_WITH(Sampler({.temperature = -1.0}), Catch::Contains("--temperature"));
  CHECK_THROWS_WITH(Sampler({.top_p = 0.0}), Catch::Contains("--top-p"));
  CHECK_THROWS_WITH(Sampler({.top_k = -3}), Catch::Contains("--top-k"));
}

TEST_CASE("generate: a checkpoint whose tensors do not fit its recorded config is refused",
          "[generate][checkpoint]") {
  dseek::testing::ScratchDir dir("generate-bad-ckpt");
  // Tensors of a dim-16 model under a config that says dim 32.
  const dseek::model::ParamLayout layout(GptShape{16, 1, 2, 8, 256});
  dseek::checkpoint::Snapshot s;
  s.step = 5;
  s.tensors = layout.tensors();
  for (auto* buffer : {&s.params, &s.adam_m, &s.adam_v}) buffer->assign(layout.total(), 0.0f);
  auto job = dseek::config::default_config();
  job.model = {.dim = 32, .layers = 1, .heads = 2, .context = 8, .vocab = 256};
  s.config_toml = dseek::config::to_toml(job);
  const auto written = dseek::checkpoint::write_checkpoint(s, {dir.path(), 3, false});
  CHECK_THROWS_AS(dseek::infer::load_checkpoint_model(written.path.string(), {}, nullptr),
                  dseek::checkpoint::CheckpointError);
  CHECK_THROWS_WITH(dseek::infer::load_checkpoint_model(written.path.string(), {}, nullptr),
                    Catch::Contains(written.path.string()) && Catch::Contains("wte"));
  CHECK_THROWS_WITH(dseek::infer::load_checkpoint_model("latest", dir / "none", nullptr),
                    Catch::Contains("no committed checkpoint under"));
}
