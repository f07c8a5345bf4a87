// One replica's running average of its own squared local gradients: the estimate of
// AdamW's second moment that data parallelism with compressed gradients uses (see
// optim::AdamWSettings::given_second_moment_after). The compressed all-reduce delivers a
// coordinate's gradient late and bunched (top-k with error feedback), so the squares of
// what it delivers are the wrong statistic; every replica still has its whole local
// gradient before compression, and those squares are the right one up to the noise of a
// smaller batch. The replicas average their estimates every few steps (the caller does
// the collective on data(), all mass() included) and the optimizer uses the average.
//
//   add(range of this step's local gradient) for every range, then end_step():
//     v    = beta2 v + (1 - beta2) (scale g)^2        per element
//     mass = beta2 mass + (1 - beta2)                 once per step (mass = 1 - beta2^steps)
//     mu   = beta2 mu + (1 - beta2) scale g           per element (the running mean)
//   corrected v = v / mass                            (AdamW's bias correction)
// mean_gradient_estimate() turns v and mu into an estimate for the mean of N replicas'
// gradients, whose noise is 1/N of one replica's (without it, v is too large by up to N
// times where noise dominates, and the steps too small).
//
// mass is stored after the n values so that averaging the buffer across replicas also
// averages it: a replica that restarted (v and mass from zero) then weighs in with what it
// has, and every replica computes the same corrected v from the same averaged buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dseek::optim {

class LocalSecondMoment {
 public:
  LocalSecondMoment(size_t n, double beta2);

  // v[offset + i] = beta2 v + (1 - beta2) (scale * grad[i])^2 for i < count. scale makes
  // the local gradient the estimate of the global one (the replica's share of the mean
  // times the number of replicas).
  void add(size_t offset, const float* grad, size_t count, float scale);
  void end_step();

  // The n values followed by the mass: n + 1 floats, to average across replicas in place.
  float* data() { return values_.data(); }
  size_t size_with_mass() const { return values_.size(); }
  size_t size() const { return values_.size() - 1; }
  float mass() const { return values_.back(); }

  // out[i] = v[i] / mass (0 everywhere before the first end_step).
  void corrected(float* out) const;

  // The estimate of the second moment of the MEAN of `replicas` local gradients (what
  // AdamW's v sees without compression), in the layout of data(): n values times the
  // mass, then the mass, to average across replicas. A local gradient's mean square is
  // its squared mean plus its variance, and the mean of N independent local gradients has
  // 1/N of one's variance; the running mean mu (same beta2) gives the first part:
  //   out = mass * (mu_c^2 + (v_c - mu_c^2) / N),  mu_c = mu / mass, v_c = v / mass
  // (v_c - mu_c^2 >= 0 for weights summing to mass; clamped against rounding). The
  // squared mean over ~1 / (1 - beta2) steps slightly underestimates the mean square
  // of a mean that moves within that window.
  void mean_gradient_estimate(float* out, int replicas) const;

 private:
  std::vector<float> values_;
  std::vector<float> means_;  // running mean of the scaled local gradients (no mass)
  float beta2_;
};

}  // namespace dseek::optim
