// Who is told of every data-plane operation as it finishes (done or failed): one
// observer per process, run on the thread that finished the operation (the progress
// thread, or the caller for an operation done at once) with the operation's state and
// its time from issue to end. A node's trace uses it for a span per collective
// (dist/trace_collectives.hpp). It must be quick and must not throw; null: none.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "comm/work.hpp"

namespace dseek::comm {

using WorkObserver = std::function<void(const WorkState& work, std::chrono::nanoseconds took)>;
void set_work_observer(std::shared_ptr<const WorkObserver> observer);

// Called by WorkState::complete() and fail() once the state is final.
void observe_work_end(const WorkState& work);

}  // namespace dseek::comm
