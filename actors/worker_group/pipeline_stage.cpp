// Implementation of pipeline_stage.hpp.
#include "actors/worker_group/pipeline_stage.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/node/node_registry.hpp"

namespace dseek::actors {

namespace {

// A request waits this long at most. Every wait of the stage on the data plane is
// bounded by the data plane's own timeout (a dead or hung peer ends the step with a
// comm::CommError); this bounds a stage that is alive but stuck in compute, far above a
// step of any model this runtime trains on a CPU. A request to an actor that is gone
// fails at once.
constexpr auto kStageAnswer = std::chrono::minutes(10);
// Releasing the trainer only frees memory.
constexpr auto kReleaseAnswer = std::chrono::seconds(30);

struct stage_state {
  std::unique_ptr<train::LocalPipelineStage> stage;
  static inline const char* name = "dseek.pipeline_stage";
};

using stage_pointer = pipeline_stage_actor::stateful_pointer<stage_state>;

// What a crash_actor fault's message names: the stage, once the actor holds one.
std::string crash_name(const stage_state& st) {
  if (!st.stage) return "pipeline_stage";
  const train::PipelineStageInfo& info = st.stage->info();
  return "pipeline_stage (stage " + std::to_string(info.stage) +
         (info.tensor_ranks > 1 ? ", tensor rank " + std::to_string(info.tensor_rank) : "") + ")";
}

// Runs `work` on the actor's stage, answering its result or what it threw.
template <class T, class Work>
stage_reply<T> guarded(stage_state& st, Work&& work) {
  stage_reply<T> reply;
  try {
    if (!st.stage)
      throw pipeline_stage_lost("the pipeline_stage actor holds no stage (it was restarted)");
    if constexpr (std::is_same_v<T, stage_done>)
      work(*st.stage);
    else
      reply.value = work(*st.stage);
  } catch (...) {
    reply.failure = std::current_exception();
  }
  return reply;
}

pipeline_stage_actor::behavior_type pipeline_stage(stage_pointer self, caf::atom_value name,
                                                   crash_requests crash) {
  using train::LocalPipelineStage;
  // The exit reason keeps what the actor threw (CAF's default keeps only
  // "runtime_error"): the supervisor's actor_restarted and the worker see which stage.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& thrown) -> caf::error {
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& error) {
      return caf::make_error(caf::sec::runtime_error, error.what());
    } catch (...) {
      return caf::make_error(caf::sec::runtime_error, "a non-standard exception");
    }
  });
  // The registry's strong reference would keep a detached actor's thread waiting for
  // the actor's destruction forever, and with it the actor system's shutdown: the
  // actor takes its name out when it ends, unless a successor has it already.
  auto& sys = self->system();
  auto* me = self->ctrl();
  self->attach_functor([&sys, me, name](const caf::error&) {
    if (sys.registry().get(name).get() == me) sys.registry().erase(name);
  });
  return {
      [self](const stage_build& build) {
        auto& st = self->state;
        st.stage.reset();
        stage_reply<stage_built> reply;
        try {
          st.stage = std::make_unique<LocalPipelineStage>(*build.spec);
          reply.value.info = st.stage->info();
          reply.value.whole_layout = &st.stage->whole_layout();
        } catch (...) {
          reply.failure = std::current_exception();
        }
        return reply;
      },
      [self](const stage_release&) {
        self->state.stage.reset();
        return stage_done{};
      },
      [self](const stage_train& m) {
        return guarded<train::PipelineStepReport>(
            self->state, [&](LocalPipelineStage& s) { return s.train_step(m.step); });
      },
      [self](const stage_evaluate& m) {
        return guarded<double>(self->state, [&](LocalPipelineStage& s) {
          return s.evaluate(*m.batches, m.eval_batches, m.stop_request, m.batches_done);
        });
      },
      [self](const stage_gather_params&) {
        return guarded<std::vector<float>>(self->state,
                                           [](LocalPipelineStage& s) { return s.gather_params(); });
      },
      [self](const stage_gather_trace&) {
        return guarded<std::vector<metrics::TraceSpan>>(
            self->state, [](LocalPipelineStage& s) { return s.gather_trace_spans(); });
      },
      [self](const stage_sum& m) {
        return guarded<std::vector<double>>(
            self->state, [&](LocalPipelineStage& s) { return s.sum_over_world(m.values); });
      },
      [self](const stage_decide& m) {
        return guarded<bool>(self->state,
                             [&](LocalPipelineStage& s) { return s.first_stage_decides(m.value); });
      },
      [self](const stage_gather_state& m) {
        return guarded<stage_done>(self->state, [&](LocalPipelineStage& s) {
          s.gather_state_to_first(m.params, m.adam_m, m.adam_v);
        });
      },
      [self](const stage_restore& m) {
        return guarded<stage_done>(self->state, [&](LocalPipelineStage& s) {
          s.restore_state(m.params, m.adam_m, m.adam_v, m.optimizer_steps);
        });
      },
      [self](const stage_copy_owned& m) {
        return guarded<stage_done>(self->state,
                                   [&](LocalPipelineStage& s) { s.copy_owned_state(m.packed); });
      },
      [self](const stage_restore_owned& m) {
        return guarded<stage_done>(self->state, [&](LocalPipelineStage& s) {
          s.restore_owned_state(m.packed, m.optimizer_steps);
        });
      },
      [self](const stage_optimizer_steps&) {
        return guarded<std::int64_t>(self->state,
                                     [](LocalPipelineStage& s) { return s.optimizer_steps(); });
      },
      [self](const stage_gather_precision&) {
        return guarded<checkpoint::PrecisionState>(
            self->state, [](LocalPipelineStage& s) { return s.gather_precision_state(); });
      },
      [self](const stage_restore_precision& m) {
        return guarded<bool>(self->state, [&](LocalPipelineStage& s) {
          return s.restore_precision_state(*m.state, m.written_by);
        });
      },
      [self, crash](crash_atom) { crash_now(crash_name(self->state), crash); },
  };
}

// The training thread's side: the trainer lives in the actor; every call is a request.
class actor_pipeline_stage final : public train::PipelineStage {
 public:
  actor_pipeline_stage(caf::actor_system& sys, pipeline_stage_actor stage,
                       const train::PipelineStageSpec& spec)
      : self_(sys), stage_(std::move(stage)) {
    stage_built built = ask<stage_built>(stage_build{&spec}, "build its stage");
    info_ = std::move(built.info);
    whole_layout_ = built.whole_layout;
  }
  ~actor_pipeline_stage() override {
    // The trainer refers to the run's links and batches, which go away after this: it
    // must be gone first. An actor that is gone holds nothing any more.
    self_->request(stage_, kReleaseAnswer, stage_release{})
        .receive([](stage_done) {}, [](caf::error&) {});
  }
  actor_pipeline_stage(const actor_pipeline_stage&) = delete;
  actor_pipeline_stage& operator=(const actor_pipeline_stage&) = delete;

  const train::PipelineStageInfo& info() const override { return info_; }
  const model::ParamLayout& whole_layout() const override { return *whole_layout_; }
  train::PipelineStepReport train_step(int64_t step) override {
    return ask<train::PipelineStepReport>(stage_train{step}, "train its step");
  }
  double evaluate(train::BatchSource& batches, int64_t eval_batches,
                  const std::atomic<bool>* stop_request, int64_t* batches_done) override {
    return ask<double>(stage_evaluate{&batches, eval_batches, stop_request, batches_done},
                       "evaluate");
  }
  std::vector<float> gather_params() override {
    return ask<std::vector<float>>(stage_gather_params{}, "gather the parameters");
  }
  std::vector<metrics::TraceSpan> gather_trace_spans() override {
    return ask<std::vector<metrics::TraceSpan>>(stage_gather_trace{}, "gather its trace");
  }
  using PipelineStage::sum_over_world;
  std::vector<double> sum_over_world(std::vector<double> values) override {
    return ask<std::vector<double>>(stage_sum{std::move(values)}, "sum over the world");
  }
  bool first_stage_decides(bool value) override {
    return ask<bool>(stage_decide{value}, "take stage 0's decision");
  }
  void gather_state_to_first(float* params, float* adam_m, float* adam_v) override {
    ask<stage_done>(stage_gather_state{params, adam_m, adam_v}, "gather its checkpoint state");
  }
  void restore_state(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps) override {
    ask<stage_done>(stage_restore{params, adam_m, adam_v, optimizer_steps}, "restore its state");
  }
  int64_t optimizer_steps() override {
    return ask<std::int64_t>(stage_optimizer_steps{}, "count its optimizer steps");
  }
  void copy_owned_state(float* packed) override {
    ask<stage_done>(stage_copy_owned{packed}, "copy its own state");
  }
  void restore_owned_state(const float* packed, int64_t optimizer_steps) override {
    ask<stage_done>(stage_restore_owned{packed, optimizer_steps}, "restore its own state");
  }
  checkpoint::PrecisionState gather_precision_state() override {
    return ask<checkpoint::PrecisionState>(stage_gather_precision{},
                                           "gather its loss scale and fp8 state");
  }
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const train::LayoutSizes& written_by) override {
    return ask<bool>(stage_restore_precision{&state, written_by},
                     "restore its loss scale and fp8 state");
  }

 private:
  // Sends `request`, waits for the answer, and returns its value or rethrows what the
  // stage threw; an actor that is gone (or stuck past kStageAnswer) is pipeline_stage_lost.
  template <class T, class Request>
  T ask(Request request, const char* what) {
    std::optional<stage_reply<T>> answer;
    std::string lost;
    self_->request(stage_, kStageAnswer, std::move(request))
        .receive([&](stage_reply<T>& reply) { answer = std::move(reply); },
                 [&](caf::error& error) { lost = self_->system().render(error); });
    if (!answer) {
      std::string stage = info_.plan.shape.stages > 0 ? " of stage " + std::to_string(info_.stage) : "";
      throw pipeline_stage_lost("the pipeline_stage actor" + stage + " did not " + what + ": " + lost);
    }
    if (answer->failure) std::rethrow_exception(answer->failure);
    return std::move(answer->value);
  }

  caf::scoped_actor self_;
  pipeline_stage_actor stage_;
  train::PipelineStageInfo info_;
  const model::ParamLayout* whole_layout_ = nullptr;
};

}  // namespace

pipeline_stage_actor spawn_pipeline_stage(caf::actor_system& sys, int local_rank,
                                          crash_requests crash) {
  const caf::atom_value name = names::pipeline_stage_of(local_rank);
  auto stage = sys.spawn<caf::detached>(pipeline_stage, name, crash);
  // At once, not when the actor first runs: the worker started next looks it up.
  names::register_handle(sys, name, stage);
  return stage;
}

train::PipelineStageFactory pipeline_stage_of(caf::actor_system& sys, pipeline_stage_actor stage) {
  return [&sys, stage](const train::PipelineStageSpec& spec)
             -> std::unique_ptr<train::PipelineStage> {
    return std::make_unique<actor_pipeline_stage>(sys, stage, spec);
  };
}

train::PipelineStageFactory pipeline_stage_for(caf::actor_system& sys, int local_rank) {
  const caf::atom_value name = names::pipeline_stage_of(local_rank);
  return [&sys, name](const train::PipelineStageSpec& spec) -> std::unique_ptr<train::PipelineStage> {
    auto stage = caf::actor_cast<pipeline_stage_actor>(names::lookup(sys, name));
    if (!stage) return nullptr;
    return pipeline_stage_of(sys, std::move(stage))(spec);
  };
}

}  // namespace dseek::actors
