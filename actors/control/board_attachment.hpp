// Keeps an epoch's communicators registered with the node's EpochBoard while the
// training runs over them (the board aborts them when a node is lost, so a collective
// blocked on a dead peer returns at once, or sets the step-boundary flag when a node
// joins), and unregisters them however the scope ends. When the training leaves by an
// exception, the communicators are aborted: an orderly teardown (a barrier with the
// peers) would wait for peers that are still mid-step.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "actors/control/epoch_board.hpp"
#include "comm/communicator.hpp"

namespace dseek::actors {

class BoardAttachment {
 public:
  // `stop_at_step_boundary` and `companion` (the epoch's NCCL communicator): see
  // EpochBoard::attach.
  BoardAttachment(EpochBoard& board, comm::Communicator* communicator, std::uint64_t epoch,
                  std::atomic<bool>* stop_at_step_boundary, comm::Communicator* companion)
      : board_(board), communicator_(communicator), companion_(companion),
        exceptions_(std::uncaught_exceptions()) {
    board_.attach(communicator, epoch, stop_at_step_boundary, companion);
  }
  ~BoardAttachment() {
    board_.attach(nullptr, 0);
    if (std::uncaught_exceptions() > exceptions_) {
      communicator_->abort("this rank's training failed");
      if (companion_ != nullptr) companion_->abort("this rank's training failed");
    }
  }
  BoardAttachment(const BoardAttachment&) = delete;
  BoardAttachment& operator=(const BoardAttachment&) = delete;

 private:
  EpochBoard& board_;
  comm::Communicator* communicator_;
  comm::Communicator* companion_;
  int exceptions_;
};

}  // namespace dseek::actors
