// Recovery from a peer: when a data-parallel world is (re)built, its ranks agree on the
// freshest training state any of them holds in memory (the last completed step) and the
// lowest rank holding it broadcasts it over the data plane, so a node that restarted
// with nothing continues exactly where the survivors are. Under ZeRO 0 every replica
// holds the whole state, so each node's copy is also a replica of its peers'.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/communicator.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

struct StateAgreement {
  int64_t steps_done = -1;  // -1: no rank had a state (start fresh, or from disk)
  int source_rank = -1;     // the rank whose state everyone now holds
  bool received = false;    // this rank had no state this fresh: it got the source's
};

// Collective: every rank of `comm` calls it. `state` is this rank's state (steps_done
// -1 for none); on return it is the freshest one (unless nobody had any). `param_count`
// sizes the buffers of ranks that had none. Throws comm::CommError when the data plane
// fails.
StateAgreement share_freshest_state(comm::Communicator& comm, train::TrainingState& state,
                                    size_t param_count);

}  // namespace dseek::dist
