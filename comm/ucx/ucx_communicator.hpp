// Building a Communicator over UCX. Two ways:
//  - two-phase, for callers that exchange addresses themselves (the actor layer through
//    its coordinator): UcxCommunicatorBuilder b(rank, size); send b.address() to every
//    peer; b.connect(addresses, hosts) with every rank's address and host name;
//  - with a Bootstrap (bootstrap/bootstrap.hpp) that does the exchange: connect_ucx().
// Host names choose the algorithms: ranks with equal host names are local to each other
// (tests give ranks fake host names to exercise the hierarchical all-reduce).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace dseek::comm {

class Bootstrap;
class UcxTransport;

class UcxCommunicatorBuilder {
 public:
  UcxCommunicatorBuilder(int world_rank, int world_size, CommOptions options = {});
  ~UcxCommunicatorBuilder();
  UcxCommunicatorBuilder(const UcxCommunicatorBuilder&) = delete;
  UcxCommunicatorBuilder& operator=(const UcxCommunicatorBuilder&) = delete;

  // The bytes every peer needs to reach this rank.
  const std::string& address() const;
  // The world's data-plane key (the same on every rank; given with the addresses, e.g.
  // by the coordinator with the epoch's rendezvous): every tag on the wire is masked with
  // it, so a process without it cannot write into this world's receives. Before connect;
  // 0 (the default) leaves tags unmasked. Never printed or logged.
  void set_data_key(uint64_t key) { data_key_ = key; }
  // addresses[r], hosts[r]: every world rank's address and host. Connects, then runs a
  // barrier (bounded by op_timeout) so a missing rank fails here, not in the first op.
  // The builder is spent afterwards. `while_connecting` (optional) gets the communicator
  // before that barrier and nullptr when connect returns or throws (before the
  // communicator is destroyed): another thread may abort() it meanwhile, so a peer that
  // never arrives need not cost the whole op_timeout.
  std::unique_ptr<Communicator> connect(
      const std::vector<std::string>& addresses, const std::vector<std::string>& hosts,
      const std::function<void(Communicator*)>& while_connecting = {});

 private:
  int rank_, size_;
  CommOptions options_;
  uint64_t data_key_ = 0;
  std::unique_ptr<UcxTransport> transport_;
};

// Exchanges (host, address) through `bootstrap` and connects.
std::unique_ptr<Communicator> connect_ucx(Bootstrap& bootstrap, const std::string& host, const CommOptions& options = {});

}  // namespace dseek::comm
