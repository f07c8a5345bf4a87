// The update of one model's parameters by an optimizer that may run on the host (the
// gradient_shard actors: AdamW offloaded to the CPU, its moments in host memory), and
// the overlap of that update with the next step's forward (train.offload_overlap).
//
// On a backend whose memory is not the host's (CUDA) a host optimizer works on host
// staging copies (host_staging.hpp): the owned gradients go down, the update runs, the
// parameters go back up. On the CPU backend the staging is the buffer itself.
//
// Overlapped (an optimizer that updates in chunks, ZeRO 0): the update goes through
// chunks in layout order -- wte+wpe, block 0, ..., block L-1, lnf -- and start() returns
// once it has begun. Each chunk goes back to the backend as soon as it is updated
// (asynchronously on CUDA), and the next forward waits, before it reads a range, only
// for the chunks in it (await(), hooked to GptModel::set_before_params_read): the
// embedding first, then block i, the head last. So the CPU updates later blocks while
// the backend computes the early ones; the wait is the step event's offload_wait_ms. The
// parameters' host staging is then the FP32 master copy: it does not come down from the
// backend every step, only after forget_host_params() (a restore). Every element is
// written once from the same inputs: the bits of the update finished in its own step.
// Whatever else reads the parameters or gradients first calls finish().
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/model/param_layout.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/train/host_staging.hpp"
#include "runtime/train/optimizer_shards.hpp"

namespace dseek::train {

class HostUpdate {
 public:
  // `chunks` in layout order (empty: never overlapped); `params` and `grads` stage the
  // model's buffers; all outlive this.
  HostUpdate(OptimizerShards& optimizer, HostStaging& params, HostStaging& grads,
             std::vector<model::ParamRange> chunks);
  ~HostUpdate();
  HostUpdate(const HostUpdate&) = delete;
  HostUpdate& operator=(const HostUpdate&) = delete;

  // Updates `owned` (the backend's buffers hold the gradients, or with `grads_on_host`
  // their host staging already does); overlapped: starts it and returns.
  optim::StepStats update(float* params, float* grads, const std::vector<model::ParamRange>& owned,
                          bool grads_on_host, double lr, double grad_norm);
  bool overlapped() const { return !chunks_.empty(); }
  bool pending() const { return pending_; }
  // Before the forward reads `range`: every chunk updated by now goes to the backend,
  // and the wait is for those in `range` only.
  void await(model::ParamRange range);
  // The rest of a started update, sent to the backend; no-op when none is pending.
  void finish();
  // The backend's parameters were written from elsewhere (a restore): the host master
  // copy comes down again at the next update.
  void forget_host_params() { host_params_current_ = false; }
  // The time forwards waited for chunks since the last call.
  double take_wait_ms();

 private:
  void send(size_t chunk);
  void wait_for(size_t chunk);

  OptimizerShards& optimizer_;
  HostStaging& params_;
  HostStaging& grads_;
  std::vector<model::ParamRange> chunks_;
  std::vector<char> chunk_on_backend_;
  bool pending_ = false;
  bool host_params_current_ = false;
  double wait_ms_ = 0.0;
};

}  // namespace dseek::train
