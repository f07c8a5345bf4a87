// Bootstrap through TCP: rank 0 listens on host:port, the others connect to it; in each
// all_gather every rank sends its contribution to rank 0, which sends the full table
// back. Connections stay open between rounds. Every wait has the caller's deadline.
#pragma once

#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"

namespace dseek::comm {

class TcpBootstrap final : public Bootstrap {
 public:
  // Rank 0 binds host:port at once (port 0: any free port, see port()).
  TcpBootstrap(std::string host, int port, int rank, int size);
  ~TcpBootstrap() override;
  TcpBootstrap(const TcpBootstrap&) = delete;
  TcpBootstrap& operator=(const TcpBootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int port() const { return port_; }
  std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) override;

 private:
  std::string host_;
  int port_, rank_, size_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: fd per rank (its own slot -1); others: [0] = rank 0
};

}  // namespace dseek::comm
