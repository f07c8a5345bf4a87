// Point-to-point scenarios: a ring shift where every rank sends and receives at once
// (pipeline stages do this), several messages in flight to one peer arriving in order,
// and sizes from one byte to several MiB.
#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario send_recv("send_recv", [](RankEnv& env) {
  const int right = (env.rank + 1) % env.size, left = (env.rank - 1 + env.size) % env.size;
  int salt = 0;
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{65537}, size_t{1} << 20}) {
    ++salt;
    // Three messages in flight in each direction: matched in order.
    std::vector<std::vector<uint8_t>> outgoing, incoming;
    std::vector<Work> works;
    for (int m = 0; m < 3; ++m) {
      outgoing.push_back(make_input(DataType::f32, count, env.rank, salt * 10 + m));
      incoming.emplace_back(count * 4, 0);
    }
    for (int m = 0; m < 3; ++m) works.push_back(env.comm->recv(incoming[static_cast<size_t>(m)].data(), count, DataType::f32, left));
    for (int m = 0; m < 3; ++m) works.push_back(env.comm->send(outgoing[static_cast<size_t>(m)].data(), count, DataType::f32, right));
    for (auto& w : works) w.wait();
    for (int m = 0; m < 3; ++m)
      require(incoming[static_cast<size_t>(m)] == make_input(DataType::f32, count, left, salt * 10 + m),
              "message " + std::to_string(m) + " of " + std::to_string(count) + " floats from rank " +
                  std::to_string(left) + " is wrong");
    require(works.back().bytes_sent() == count * 4, "send byte counter");
    require(works.front().bytes_received() == count * 4, "recv byte counter");
  }
});

}  // namespace
}  // namespace dseek::comm::test
