// The NCCL backend: the same Communicator interface over NCCL for buffers in GPU memory.
// Operations run on the communicator's own CUDA stream; a watcher thread turns their
// completion events into Work completions, enforces each operation's deadline and polls
// NCCL's asynchronous errors; a timeout, an error or abort() aborts the NCCL
// communicator (ncclCommAbort), so no rank waits forever in a dead collective.
// Built only when CUDA is found (DSEEK_HAVE_NCCL).
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace dseek::comm {

class Bootstrap;

// Creates the NCCL communicator of bootstrap.size() ranks on CUDA device `device`; rank 0
// makes the unique id and the bootstrap spreads it.
std::unique_ptr<Communicator> connect_nccl(Bootstrap& bootstrap, int device, const CommOptions& options = {});

// Throws std::runtime_error -- not a CommError: no later epoch fixes it -- when CUDA
// device `device` cannot be used here (no GPU, no driver), so that a node fails at once
// instead of waiting for a world it can never train in.
void require_cuda_device(int device);

// The same in two halves, for callers that spread the id themselves (the node's actors
// put it in the rendezvous that carries the UCX addresses, one per world epoch):
// rank 0 makes a fresh unique id (its bytes) ...
std::string make_nccl_unique_id();
// ... and every rank joins with those bytes: the communicator of `size` ranks on CUDA
// device `device`, bounded by options.op_timeout (CommError on timeout or failure).
std::unique_ptr<Communicator> connect_nccl(const std::string& unique_id, int rank, int size, int device,
                                           const CommOptions& options = {});

}  // namespace dseek::comm
