// The communicators of one rank of a data x pipeline x tensor job, cut from the world's
// by the layout of runtime/train/layout/parallel_groups.hpp (world rank = the communicator's
// rank): its tensor-parallel group, its pipeline (the stages of its replica) and its
// data-parallel group (the same stage and tensor rank in every replica). A dimension of
// size 1 has no communicator (null): there is nothing to talk to.
//
// Every rank of the world cuts every group of every dimension, in the same order, as
// Communicator::subgroup requires; nothing goes over the wire.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "runtime/train/layout/parallel_groups.hpp"

namespace dseek::dist {

struct ParallelCommunicators {
  std::unique_ptr<comm::Communicator> tensor, pipeline, data;
};

// Throws std::invalid_argument when the world's size is not the layout's.
ParallelCommunicators cut_parallel_groups(comm::Communicator& world,
                                          const train::ParallelGroups& groups);

}  // namespace dseek::dist
