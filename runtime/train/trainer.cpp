// Implementation of trainer.hpp.
#include "runtime/train/trainer.hpp"

#include <chrono>
#include <vector>

#include "runtime/util/sha256.hpp"

namespace dseek::train {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
}  // namespace

model::GptShape shape_of(const config::ModelConfig& m) {
  return model::GptShape{m.dim, m.layers, m.heads, m.context, m.vocab};
}

Trainer::Trainer(const config::JobConfig& config, BatchSource& train_batches)
    : config_(config), batches_(train_batches),
      backend_(backend::make_cpu_backend(static_cast<int>(config.train.threads))),
      micro_batch_(config.train.micro_batch_size > 0 ? config.train.micro_batch_size
                                                     : config.train.batch_size) {
  const auto& t = config.train;
  model_ = std::make_unique<model::GptModel>(shape_of(config.model),
                                             model::LayerRange{0, config.model.layers},
                                             *backend_, micro_batch_);
  model_->init_weights(static_cast<uint64_t>(t.seed), config.model.init_std);
  optimizer_ = std::make_unique<optim::AdamW>(
      *backend_, model_->layout(),
      optim::AdamWSettings{t.beta1, t.beta2, t.eps, t.weight_decay, t.grad_clip});
  schedule_ = optim::LrSchedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  const size_t tokens = static_cast<size_t>(micro_batch_ * config.model.context);
  inputs_.resize(tokens);
  targets_.resize(tokens);
}

StepReport Trainer::train_step(int64_t step) {
  const auto start = Clock::now();
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  const int64_t micro_steps = batch / micro_batch_;
  StepReport report;
  report.step = step;
  report.lr = schedule_.at(step);
  // Each micro-batch's mean loss, scaled so the accumulated gradient is the gradient of
  // the mean over the whole batch.
  const float dloss = 1.0f / static_cast<float>(micro_batch_ * T) / static_cast<float>(micro_steps);
  model_->zero_grads();
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    const auto data_start = Clock::now();
    batches_.fill(static_cast<uint64_t>(step), batch, micro * micro_batch_, micro_batch_, T,
                  inputs_.data(), targets_.data());
    report.data_wait_ms += ms_since(data_start);
    report.loss += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T) /
                   static_cast<double>(micro_steps);
    model_->backward(dloss);
  }
  const auto stats = optimizer_->step(model_->params(), model_->grads(), report.lr);
  report.grad_norm = stats.grad_norm;
  report.step_ms = ms_since(start);
  report.compute_ms = report.step_ms - report.data_wait_ms;
  report.tokens_per_s = static_cast<double>(batch * T) / (report.step_ms / 1000.0);
  return report;
}

double Trainer::evaluate(BatchSource& batches, int64_t eval_batches) {
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t b = 0; b < eval_batches; ++b) {
    for (int64_t first = 0; first < batch; first += micro_batch_) {
      batches.fill(static_cast<uint64_t>(b), batch, first, micro_batch_, T, inputs_.data(),
                   targets_.data());
      total += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T);
      ++count;
    }
  }
  return total / static_cast<double>(count);
}

void Trainer::snapshot(float* params, float* adam_m, float* adam_v) {
  const size_t bytes = model_->num_params() * sizeof(float);
  backend_->copy_to_host(params, model_->params(), bytes);
  backend_->copy_to_host(adam_m, optimizer_->first_moment(), bytes);
  backend_->copy_to_host(adam_v, optimizer_->second_moment(), bytes);
}

void Trainer::restore(const float* params, const float* adam_m, const float* adam_v,
                      int64_t optimizer_steps) {
  const size_t bytes = model_->num_params() * sizeof(float);
  backend_->copy_from_host(model_->params(), params, bytes);
  backend_->copy_from_host(optimizer_->first_moment(), adam_m, bytes);
  backend_->copy_from_host(optimizer_->second_moment(), adam_v, bytes);
  optimizer_->set_steps_taken(optimizer_steps);
}

std::string Trainer::params_sha256() {
  std::vector<float> host(model_->num_params());
  backend_->copy_to_host(host.data(), model_->params(), host.size() * sizeof(float));
  return util::sha256_hex(host.data(), host.size() * sizeof(float));
}

}  // namespace dseek::train
