// Keeps a training's communicator registered with the node's EpochBoard (which aborts
// it when a node is lost, so a collective blocked on a dead peer returns at once) while
// the training runs, and unregisters it however the scope ends. Used by the paths that
// cannot lose a node and go on (fixed_world_training, for pipeline_stage_training and
// tensor_parallel_training).
#pragma once

#include <cstdint>

#include "actors/node/epoch_board.hpp"
#include "comm/communicator.hpp"

namespace dseek::actors {

class BoardAttachment {
 public:
  BoardAttachment(EpochBoard& board, comm::Communicator* communicator, std::uint64_t epoch)
      : board_(board) {
    board_.attach(communicator, epoch);
  }
  ~BoardAttachment() { board_.attach(nullptr, 0); }
  BoardAttachment(const BoardAttachment&) = delete;
  BoardAttachment& operator=(const BoardAttachment&) = delete;

 private:
  EpochBoard& board_;
};

}  // namespace dseek::actors
