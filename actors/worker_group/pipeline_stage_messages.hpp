// The typed interface of the pipeline_stage actor (pipeline_stage.hpp): one request per
// piece of a stage's work, each answered by a stage_reply that carries either the
// result or the exception the stage's trainer threw (rethrown as it was on the side that
// asked: a data plane failure stays a comm::CommError).
//
// The messages hold pointers into the asking process (the stage's spec, batch sources,
// checkpoint buffers) and std::exception_ptr: they are local to one process and never
// announced. Other CAF applications embed the actor through this interface (README.md,
// "Embedding dseek's actors").
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::actors {

// A stage's answer: `value`, unless `failure` holds what the stage threw.
template <class T>
struct stage_reply {
  T value{};
  std::exception_ptr failure;
};
struct stage_done {};  // the value of a reply that has none

// Builds the stage's trainer from *spec (which must stay valid until the reply; what it
// refers to, until stage_release), replacing any the actor held.
struct stage_build {
  const train::PipelineStageSpec* spec = nullptr;
};
// Drops the trainer (before what its spec referred to goes away).
struct stage_release {};
struct stage_train {
  std::int64_t step = 0;
};
struct stage_evaluate {
  train::BatchSource* batches = nullptr;
  std::int64_t eval_batches = 0;
  const std::atomic<bool>* stop_request = nullptr;  // PipelineStage::evaluate's
  std::int64_t* batches_done = nullptr;
};
struct stage_gather_params {};
struct stage_gather_trace {};
struct stage_sum {
  std::vector<double> values;
};
struct stage_decide {
  bool value = false;
};
struct stage_gather_state {
  float* params = nullptr;  // whole-layout buffers on stage 0, null on the others
  float* adam_m = nullptr;
  float* adam_v = nullptr;
};
struct stage_restore {
  const float* params = nullptr;
  const float* adam_m = nullptr;
  const float* adam_v = nullptr;
  std::int64_t optimizer_steps = 0;
};
struct stage_optimizer_steps {};
// This rank's own state, packed (PipelineStage::copy_owned_state), and back.
struct stage_copy_owned {
  float* packed = nullptr;
};
struct stage_restore_owned {
  const float* packed = nullptr;
  std::int64_t optimizer_steps = 0;
};
// The loss scale and fp8 state: gathered (collective), and put back from `state`.
struct stage_gather_precision {};
struct stage_restore_precision {
  const checkpoint::PrecisionState* state = nullptr;
  train::LayoutSizes written_by;
};

// The info carries a pointer to the trainer's whole layout: valid until stage_release.
struct stage_built {
  train::PipelineStageInfo info;
  const model::ParamLayout* whole_layout = nullptr;
};

using pipeline_stage_actor = caf::typed_actor<
    caf::replies_to<stage_build>::with<stage_reply<stage_built>>,
    caf::replies_to<stage_release>::with<stage_done>,
    caf::replies_to<stage_train>::with<stage_reply<train::PipelineStepReport>>,
    caf::replies_to<stage_evaluate>::with<stage_reply<double>>,
    caf::replies_to<stage_gather_params>::with<stage_reply<std::vector<float>>>,
    caf::replies_to<stage_gather_trace>::with<stage_reply<std::vector<metrics::TraceSpan>>>,
    caf::replies_to<stage_sum>::with<stage_reply<std::vector<double>>>,
    caf::replies_to<stage_decide>::with<stage_reply<bool>>,
    caf::replies_to<stage_gather_state>::with<stage_reply<stage_done>>,
    caf::replies_to<stage_restore>::with<stage_reply<stage_done>>,
    caf::replies_to<stage_optimizer_steps>::with<stage_reply<std::int64_t>>,
    caf::replies_to<stage_copy_owned>::with<stage_reply<stage_done>>,
    caf::replies_to<stage_restore_owned>::with<stage_reply<stage_done>>,
    caf::replies_to<stage_gather_precision>::with<stage_reply<checkpoint::PrecisionState>>,
    caf::replies_to<stage_restore_precision>::with<stage_reply<bool>>,
    caf::reacts_to<crash_atom>>;

}  // namespace dseek::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_build)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_release)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_train)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_evaluate)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_gather_params)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_gather_trace)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_sum)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_decide)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_gather_state)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_restore)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_gather_precision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_restore_precision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_optimizer_steps)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_copy_owned)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_restore_owned)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<dseek::actors::stage_built>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<dseek::train::PipelineStepReport>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<double>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<std::vector<float>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<std::vector<double>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<std::vector<dseek::metrics::TraceSpan>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<bool>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<dseek::actors::stage_done>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<std::int64_t>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::stage_reply<dseek::checkpoint::PrecisionState>)
