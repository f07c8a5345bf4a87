// Message naming and completion bookkeeping shared by all operations.
#include "comm/operation.hpp"

#include "comm/tags.hpp"

namespace dseek::comm {

IoPtr Operation::send_to(int group_rank, uint32_t piece, const void* data, size_t bytes) {
  const GroupInfo& g = group();
  return ctx_.transport->send(g.world_of(group_rank), make_tag(g.context, g.world_of(g.index), false, ctx_.seq, piece),
                              data, bytes);
}

IoPtr Operation::recv_from(int group_rank, uint32_t piece, void* data, size_t bytes) {
  const GroupInfo& g = group();
  return ctx_.transport->recv(g.world_of(group_rank), make_tag(g.context, g.world_of(group_rank), false, ctx_.seq, piece),
                              data, bytes);
}

IoPtr Operation::p2p_send(int group_rank, uint32_t seq, const void* data, size_t bytes) {
  const GroupInfo& g = group();
  return ctx_.transport->send(g.world_of(group_rank), make_tag(g.context, g.world_of(g.index), true, seq, 0), data,
                              bytes);
}

IoPtr Operation::p2p_recv(int group_rank, uint32_t seq, void* data, size_t bytes) {
  const GroupInfo& g = group();
  return ctx_.transport->recv(g.world_of(group_rank), make_tag(g.context, g.world_of(group_rank), true, seq, 0), data,
                              bytes);
}

bool Operation::collect(IoPtr& io, bool is_send) {
  if (!io) return true;
  if (!io->done) return false;
  if (io->failed)
    throw CommError(ErrorKind::peer_failed, std::string(is_send ? "send" : "receive") + " of " +
                                                std::to_string(io->bytes) + " bytes failed: " + io->error);
  for (WorkState* w : {ctx_.work.get(), ctx_.totals.get()}) {
    if (w == nullptr) continue;
    if (is_send) w->add_sent(io->bytes);
    else w->add_received(io->bytes);
  }
  io.reset();
  return true;
}

void Operation::count_moved(uint64_t sent, uint64_t received) {
  for (WorkState* w : {ctx_.work.get(), ctx_.totals.get()}) {
    if (w == nullptr) continue;
    w->add_sent(sent);
    w->add_received(received);
  }
}

}  // namespace dseek::comm
