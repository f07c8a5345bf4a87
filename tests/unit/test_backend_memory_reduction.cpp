// The pieces of the data-parallel path that keeps gradients in the compute backend's
// memory (comm.backend = "nccl"), checked in one process on the scrambled test device
// (memory that reads as garbage unless it goes through the backend's copies):
//   - BackendStagedCommunicator moves every operation's buffers through the backend's
//     copies: what the host communicator sees are the values, what lands in backend
//     memory are its results, in place where the reducer asks (reduce-scatter pieces
//     inside the bucket); it refuses to run unbound, and a host failure fails the Work;
//   - CommGradientReducer with ReducerSettings::backend_memory reduces the trainer's own
//     buffer (ZeRO 0 and 2, odd sizes, uneven shards) and runs its small collectives
//     through backend scratch;
//   - the epoch board aborts the epoch's NCCL communicator with its UCX one (a lost node
//     must not leave the survivors in an NCCL collective);
//   - the config errors of comm.backend = "nccl" name their keys.
// The host communicator here is a test double standing for `size` ranks that all hold
// what this rank holds (support/identical_ranks_communicator.hpp), so every expected
// value is exact. The
// same path over real UCX ranks is tests/dp/test_backend_memory.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/control/data_plane_link.hpp"
#include "actors/control/epoch_board.hpp"
#include "dist/backend_staged_communicator.hpp"
#include "dist/comm_gradient_reducer.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/config/load.hpp"
#include "support/identical_ranks_communicator.hpp"
#include "support/random_values.hpp"

using namespace dseek;
using dseek::testing::IdenticalRanksCommunicator;
using Catch::Matchers::Contains;

namespace {

std::vector<float> read(backend::Backend& backend, const float* device, size_t n) {
  std::vector<float> host(n);
  backend.copy_to_host(host.data(), device, n * sizeof(float));
  return host;
}

}  // namespace

TEST_CASE("backend-staged communicator: operations move backend memory through its copies",
          "[comm][backend_memory]") {
  auto scrambled = backend::make_scrambled_backend(1);
  const size_t count = 1001;  // odd: uneven shards over 3 ranks
  const auto values = testing::random_values(count, 11, 1.0f);
  backend::DeviceBuffer<float> buffer(*scrambled, count);
  IdenticalRanksCommunicator host(1, 3);
  dist::BackendStagedCommunicator staged(host);
  CHECK_THROWS_WITH(staged.all_reduce(buffer.data(), count, comm::DataType::f32, comm::ReduceOp::sum),
                    Contains("bind_backend"));
  staged.bind_backend(*scrambled);

  scrambled->copy_from_host(buffer.data(), values.data(), count * sizeof(float));
  staged.all_reduce(buffer.data(), count, comm::DataType::f32, comm::ReduceOp::sum).wait();
  auto reduced = read(*scrambled, buffer.data(), count);
  for (size_t i = 0; i < count; ++i) REQUIRE(reduced[i] == values[i] * 3.0f);

  // In place: rank 1's piece lies inside the bucket, where the shard rule puts it.
  scrambled->copy_from_host(buffer.data(), values.data(), count * sizeof(float));
  const size_t offset = staged.shard_offset(count), piece = staged.shard_count(count);
  REQUIRE(offset > 0);
  staged.reduce_scatter(buffer.data(), buffer.data() + offset, count, comm::DataType::f32,
                        comm::ReduceOp::sum).wait();
  reduced = read(*scrambled, buffer.data(), count);
  for (size_t i = 0; i < count; ++i) {
    const bool in_piece = i >= offset && i < offset + piece;
    REQUIRE(reduced[i] == (in_piece ? values[i] * 3.0f : values[i]));
  }

  // All-gather in place: this rank's shard is read from backend memory, every shard lands.
  scrambled->copy_from_host(buffer.data(), values.data(), count * sizeof(float));
  staged.all_gather(buffer.data() + offset, buffer.data(), count, comm::DataType::f32).wait();
  const auto gathered = read(*scrambled, buffer.data(), count);
  for (int r = 0; r < 3; ++r) {
    const size_t start = comm::shard_offset(count, 3, r);
    for (size_t i = 0; i < comm::shard_count(count, 3, r); ++i)
      REQUIRE(gathered[start + i] == values[offset + i % piece]);
  }

  // A failure of the host communicator is the Work's failure.
  host.fail_next = true;
  CHECK_THROWS_AS(staged.barrier().wait(), comm::CommError);
}

TEST_CASE("gradient reducer on backend memory: reduces the trainer's buffer in place",
          "[comm][backend_memory]") {
  auto scrambled = backend::make_scrambled_backend(1);
  // A partition in backward order (last layers first) of an odd-sized buffer.
  const size_t total = 1003;
  const std::vector<model::ParamRange> backward_order{{700, 303}, {301, 399}, {0, 301}};
  const auto values = testing::random_values(total, 5, 0.5f);
  for (int zero : {0, 2}) {
    INFO("ZeRO " << zero);
    IdenticalRanksCommunicator host(2, 3);
    dist::BackendStagedCommunicator staged(host);
    staged.bind_backend(*scrambled);
    dist::ReducerSettings settings;
    settings.zero_stage = zero;
    settings.backend_memory = true;
    settings.bucket_bytes = 1500;  // each range a bucket
    dist::CommGradientReducer reducer(staged, settings);
    CHECK(reducer.reduces_backend_memory());
    backend::DeviceBuffer<float> grads(*scrambled, total);
    CHECK_THROWS_WITH(reducer.attach(grads.data(), total, backward_order), Contains("bind_backend"));
    reducer.bind_backend(*scrambled);
    reducer.attach(grads.data(), total, backward_order);
    scrambled->copy_from_host(grads.data(), values.data(), total * sizeof(float));

    reducer.begin_step(0);
    for (const auto& range : backward_order) reducer.gradients_ready(range);
    reducer.finish();
    const auto reduced = read(*scrambled, grads.data(), total);
    std::vector<char> owned(total, zero == 0 ? 1 : 0);
    for (const auto& range : reducer.shard())
      for (size_t i = range.offset; i < range.end(); ++i) owned[i] = 1;
    for (size_t i = 0; i < total; ++i)
      REQUIRE(reduced[i] == (owned[i] ? values[i] * 3.0f : values[i]));

    // The small collectives: every rank holds these values, so their sum is 3 times.
    std::vector<double> sums{1.25, -2.5};
    reducer.sum_over_ranks(sums);
    CHECK(sums == std::vector<double>{3.75, -7.5});
    CHECK(reducer.gather_u64(42) == std::vector<uint64_t>{42, 42, 42});
    reducer.detach();
  }
}

TEST_CASE("epoch board: a membership change aborts the NCCL communicator with the UCX one",
          "[actors][backend_memory]") {
  actors::EpochBoard board;
  IdenticalRanksCommunicator host(0, 2), device(0, 2);  // abort() makes the next op fail
  board.attach(&host, 1, nullptr, &device);
  board.abort_before(2, "node 1 lost");
  CHECK(host.fail_next);
  CHECK(device.fail_next);
  // Detached: a later change touches neither.
  board.attach(nullptr, 0);
  host.fail_next = device.fail_next = false;
  board.abort_before(3, "node 1 lost again");
  CHECK_FALSE(host.fail_next);
  CHECK_FALSE(device.fail_next);
  // Attached for an epoch that is already over: both are aborted at once.
  board.attach(&host, 2, nullptr, &device);
  CHECK(host.fail_next);
  CHECK(device.fail_next);
  board.attach(nullptr, 0);
}

TEST_CASE("comm.backend = nccl: runs in every layout on cuda, with compression over the "
          "host plane, and is refused on the CPU naming its keys", "[config][backend_memory]") {
  auto error_of = [](const config::JobConfig& job) {
    try {
      config::check_supported(job);
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto on_cpu = config::load_config_text("", "x.toml", {"comm.backend=\"nccl\""});
  CHECK_THAT(error_of(on_cpu), Contains("comm.backend = \"nccl\"") && Contains("train.device = \"cuda\""));
  const auto on_cuda = config::load_config_text(
      "", "x.toml", {"comm.backend=\"nccl\"", "train.device=\"cuda\""});
  CHECK(error_of(on_cuda).empty());
  const auto compressed = config::load_config_text(
      "[cluster]\nnodes = 2\n[parallel]\ndata = 2\n", "x.toml",
      {"comm.backend=\"nccl\"", "train.device=\"cuda\"", "comm.compression=\"int8\""});
  CHECK(error_of(compressed).empty());
  // The codec encodes in host memory: the compressed gradients stay on the host plane.
  CHECK_FALSE(dist::reducer_settings(compressed).backend_memory);
  dist::ReducerSettings by_hand = dist::reducer_settings(compressed);
  by_hand.backend_memory = true;
  CHECK_THROWS_WITH(dist::check_reducer_settings(by_hand), Contains("comm.compression = \"int8\""));
  CHECK(dist::reducer_settings(on_cuda).backend_memory);
  // Pipeline and tensor-parallel jobs run over NCCL too (their tensor group's all-reduces
  // and data group's gradients; the activations between stages over UCX).
  for (const char* layout : {"[cluster]\nnodes = 2\n[parallel]\npipeline = 2\n",
                             "[cluster]\nnodes = 2\n[parallel]\ntensor = 2\n",
                             "[cluster]\nnodes = 8\n[parallel]\ndata = 2\npipeline = 2\ntensor = 2\n"}) {
    INFO(layout);
    const auto job = config::load_config_text(layout, "x.toml",
                                              {"comm.backend=\"nccl\"", "train.device=\"cuda\""});
    CHECK(error_of(job).empty());
    CHECK(dist::reducer_settings(job).backend_memory);
  }
  CHECK_FALSE(dist::reducer_settings(config::load_config_text("", "x.toml")).backend_memory);
#ifdef DSEEK_HAVE_NCCL
  CHECK_NOTHROW(actors::check_data_plane_available(on_cuda));
#else
  CHECK_THROWS_WITH(actors::check_data_plane_available(on_cuda),
                    Contains("comm.backend = \"nccl\": this build has no NCCL"));
#endif
}
