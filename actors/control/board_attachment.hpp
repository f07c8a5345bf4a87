// Keeps a training's communicator registered with the node's EpochBoard (which aborts
// it when a node is lost, so a collective blocked on a dead peer returns at once) while
// the training runs, and unregisters it however the scope ends. Used by the paths that
// re-plan after a node loss (fixed_world_training: pipeline and tensor-parallel jobs).
#pragma once

#include <atomic>
#include <cstdint>

#include "actors/control/epoch_board.hpp"
#include "comm/communicator.hpp"

namespace dseek::actors {

class BoardAttachment {
 public:
  // `stop_at_step_boundary`: see EpochBoard::attach.
  BoardAttachment(EpochBoard& board, comm::Communicator* communicator, std::uint64_t epoch,
                  std::atomic<bool>* stop_at_step_boundary = nullptr)
      : board_(board) {
    board_.attach(communicator, epoch, stop_at_step_boundary);
  }
  ~BoardAttachment() { board_.attach(nullptr, 0); }
  BoardAttachment(const BoardAttachment&) = delete;
  BoardAttachment& operator=(const BoardAttachment&) = delete;

 private:
  EpochBoard& board_;
};

}  // namespace dseek::actors
