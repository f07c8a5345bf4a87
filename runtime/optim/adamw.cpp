// Implementation of adamw.hpp.
#include "runtime/optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dseek::optim {

namespace {
size_t total_count(const std::vector<model::ParamRange>& ranges) {
  size_t total = 0;
  for (const auto& range : ranges) total += range.count;
  return total;
}

void check_owned(const std::vector<model::ParamRange>& owned, size_t total) {
  std::vector<model::ParamRange> sorted = owned;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].end() > total)
      throw std::invalid_argument("AdamW: owned range [" + std::to_string(sorted[i].offset) +
                                  ", " + std::to_string(sorted[i].end()) +
                                  ") is outside the " + std::to_string(total) + " parameters");
    if (i > 0 && sorted[i - 1].end() > sorted[i].offset)
      throw std::invalid_argument("AdamW: owned ranges overlap at " +
                                  std::to_string(sorted[i].offset));
  }
}
}  // namespace

AdamW::AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings)
    : AdamW(backend, layout, settings, {model::ParamRange{0, layout.total()}}) {}

AdamW::AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings,
             std::vector<model::ParamRange> owned)
    : backend_(backend), settings_(settings), owned_(std::move(owned)),
      owned_count_(total_count(owned_)), m_(backend, owned_count_), v_(backend, owned_count_) {
  check_owned(owned_, layout.total());
  plan_runs(layout);
}

namespace {
std::vector<model::ParamRange> ranges_of(const std::vector<DecayRange>& owned) {
  std::vector<model::ParamRange> ranges;
  for (const DecayRange& d : owned) ranges.push_back(d.range);
  return ranges;
}
}  // namespace

AdamW::AdamW(backend::Backend& backend, AdamWSettings settings, const std::vector<DecayRange>& owned)
    : backend_(backend), settings_(settings), owned_(ranges_of(owned)),
      owned_count_(total_count(owned_)), m_(backend, owned_count_), v_(backend, owned_count_) {
  check_owned(owned_, std::numeric_limits<size_t>::max());
  size_t moment_offset = 0;
  for (const DecayRange& d : owned) {
    // Each range lies in one tensor (a tensor-parallel shard's slice of it): with a given
    // second moment the update is capped per run, so ranges stay runs of their own.
    if (!runs_.empty() && settings_.given_second_moment_after < 0) {
      Run& last = runs_.back();
      if (last.decay == d.decay && last.offset + last.size == d.range.offset &&
          last.moment_offset + last.size == moment_offset) {
        last.size += d.range.count;
        moment_offset += d.range.count;
        continue;
      }
    }
    runs_.push_back({d.range.offset, moment_offset, d.range.count, d.decay});
    moment_offset += d.range.count;
  }
}

// Each owned range cut where the decay setting changes; neighbours that continue each
// other in both the parameters and the moments are merged, so the whole-buffer
// optimizer makes one call per decay run, as before sharding existed.
void AdamW::plan_runs(const model::ParamLayout& layout) {
  size_t moment_offset = 0;
  for (const auto& range : owned_) {
    for (const auto& tensor : layout.tensors()) {
      const size_t begin = std::max(range.offset, tensor.offset);
      const size_t end = std::min(range.end(), tensor.offset + tensor.size());
      if (begin >= end) continue;
      const size_t moment = moment_offset + (begin - range.offset);
      // With a given second moment the update is capped per tensor: keep tensors apart.
      if (!runs_.empty() && settings_.given_second_moment_after < 0) {
        Run& last = runs_.back();
        if (last.decay == tensor.decay && last.offset + last.size == begin &&
            last.moment_offset + last.size == moment) {
          last.size += end - begin;
          continue;
        }
      }
      runs_.push_back({begin, moment, end - begin, tensor.decay});
    }
    moment_offset += range.count;
  }
}

StepStats AdamW::step(float* params, const float* grads, double lr) {
  double squares = 0.0;
  for (const auto& range : owned_) squares += backend_.sum_squares(grads + range.offset, range.count);
  return step_with_norm(params, grads, lr, std::sqrt(squares));
}

StepStats AdamW::step_with_norm(float* params, const float* grads, double lr, double grad_norm,
                                float loss_scale, const RunDone& after_run) {
  StepStats stats;
  stats.grad_norm = grad_norm;
  if (settings_.grad_clip > 0.0 && stats.grad_norm > settings_.grad_clip)
    stats.clip_scale = settings_.grad_clip / (stats.grad_norm + 1e-6);
  // A power-of-two loss scale divides out exactly (barring subnormals).
  const float grad_scale = static_cast<float>(stats.clip_scale) / loss_scale;
  ++step_;
  if (uses_given_second_moment()) {
    step_with_given_second_moment(params, grads, lr, grad_scale, after_run);
    return stats;
  }
  for (const Run& run : runs_) {
    backend_.adamw_update(params + run.offset, grads + run.offset, m_.data() + run.moment_offset,
                          v_.data() + run.moment_offset, run.size, static_cast<float>(lr),
                          static_cast<float>(settings_.beta1), static_cast<float>(settings_.beta2),
                          static_cast<float>(settings_.eps),
                          run.decay ? static_cast<float>(settings_.weight_decay) : 0.0f, step_,
                          grad_scale);
    if (after_run) after_run(run.offset + run.size);
  }
  return stats;
}

bool AdamW::uses_given_second_moment() const {
  return settings_.given_second_moment_after >= 0 && step_ > settings_.given_second_moment_after;
}

// The standard update (cpu_adamw.cpp, same order of operations) with v read, not written,
// and no bias correction of v: the given estimate is already corrected; one backend op
// per tensor (Backend::adamw_given_moment_update), on whichever backend holds the state.
//
// Adafactor's update clipping (Shazeer and Stern 2018, d = given_update_rms): a fixed v
// does not grow with gradients that grow between refreshes, as AdamW's own v would, so
// the bias-corrected update m / sqrt(v) of a tensor (a run: runs are not merged in this
// mode) is scaled down to an RMS of given_update_rms when it exceeds it. An optimizer
// that owns part of a tensor (a gradient shard's piece) caps that part by its own RMS, so
// replicas agree only if they cut the same pieces (the same gradient shard count:
// train.threads, or the same core count with train.threads = 0). Known limitation: hosts
// with different core counts and train.threads = 0 would diverge (replica checks report it).
void AdamW::step_with_given_second_moment(float* params, const float* grads, double lr,
                                          float clip_scale, const RunDone& after_run) {
  if (!second_moment_set_)
    throw std::logic_error("AdamW: step " + std::to_string(step_) +
                           " uses a given second moment, but none was given (set_second_moment)");
  const float beta1 = given_beta1();
  const float eps = static_cast<float>(settings_.eps);
  const float step_size = static_cast<float>(lr) / (1.0f - std::pow(beta1, static_cast<float>(step_)));
  const float correction = 1.0f / (1.0f - std::pow(beta1, static_cast<float>(step_)));
  for (const Run& run : runs_) {
    const float decay = 1.0f - static_cast<float>(lr) * (run.decay ? static_cast<float>(settings_.weight_decay) : 0.0f);
    backend_.adamw_given_moment_update(params + run.offset, grads + run.offset,
                                       m_.data() + run.moment_offset, v_.data() + run.moment_offset,
                                       run.size, beta1, eps, clip_scale, decay, step_size,
                                       correction, settings_.given_update_rms);
    if (after_run) after_run(run.offset + run.size);
  }
}

float AdamW::given_beta1() const {
  return static_cast<float>(settings_.given_beta1 >= 0.0 ? settings_.given_beta1 : settings_.beta1);
}

void AdamW::set_second_moment(const float* second_moment) {
  size_t moment = 0;
  for (const auto& range : owned_) {
    backend_.copy_from_host(v_.data() + moment, second_moment + range.offset, range.count * sizeof(float));
    moment += range.count;
  }
  second_moment_set_ = true;
}

void AdamW::moments_to_host(float* adam_m, float* adam_v) {
  size_t moment = 0;
  for (const auto& range : owned_) {
    backend_.copy_to_host(adam_m + range.offset, m_.data() + moment, range.count * sizeof(float));
    backend_.copy_to_host(adam_v + range.offset, v_.data() + moment, range.count * sizeof(float));
    moment += range.count;
  }
}

void AdamW::moments_from_host(const float* adam_m, const float* adam_v) {
  size_t moment = 0;
  for (const auto& range : owned_) {
    backend_.copy_from_host(m_.data() + moment, adam_m + range.offset, range.count * sizeof(float));
    backend_.copy_from_host(v_.data() + moment, adam_v + range.offset, range.count * sizeof(float));
    moment += range.count;
  }
  second_moment_set_ = true;
}

}  // namespace dseek::optim
