// Implementation of sink.hpp's write_reporting, shared by every CheckpointSink.
#include "runtime/checkpoint/sink.hpp"

#include <exception>

namespace dseek::checkpoint {

WriteOutcome write_reporting(const Snapshot& snapshot, WriteOptions options, bool fail_midway) {
  WriteOutcome outcome;
  outcome.step = snapshot.step;
  options.fail_midway = fail_midway;
  try {
    outcome.result = write_checkpoint(snapshot, options);
    outcome.ok = true;
  } catch (const std::exception& error) {
    outcome.error = error.what();
  }
  return outcome;
}

}  // namespace dseek::checkpoint
