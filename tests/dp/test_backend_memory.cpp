// The data-parallel path that keeps the gradients in the compute backend's memory -- the
// one comm.backend = "nccl" takes on a GPU (ReducerSettings::backend_memory: the reducer
// works on the trainer's own gradient and parameter buffers, nothing staged through the
// host) -- run where there is no GPU: on the scrambled test device (memory that reads as
// garbage unless it goes through the backend's copies), with every collective staged
// through a BackendStagedCommunicator over UCX (dseek_test_rank --staged-backend-memory 1).
//
// Against the default path on the same device (the trainer's host staging, per bucket):
// the same bits, every step and every replica -- both run the same UCX reductions on the
// same values, so anything but equality means a buffer read or written behind the
// backend's back, a piece put in the wrong place, or a missed reduction. 2 and 3 replicas
// (3: uneven shards of every bucket), buckets of an odd byte budget, ZeRO 0 and 2 (the
// in-place reduce-scatter and the all-gather of parameters in backend memory), the
// replica checks and evaluation (the small collectives through backend scratch), and
// ZeRO 2's checkpoint snapshots (the moments gathered through backend memory).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "dp/dp_job.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::dp;

namespace {

constexpr size_t kOddBuckets = 10001;  // bytes: buckets of uneven sizes, several per step
constexpr int kSteps = 6;

JobRun run_on_scrambled_device(int ranks, int zero, bool backend_memory) {
  ScratchDir dir("dp-backend-memory-" + std::to_string(ranks) + "-" + std::to_string(zero) +
                 (backend_memory ? "-device" : "-host"));
  const std::vector<std::string> settings = tiny_settings(
      {"train.device=\"scrambled-cpu-for-tests\"", "parallel.zero=" + std::to_string(zero),
       "train.steps=" + std::to_string(kSteps), "train.eval_every=3",
       "train.replica_check_every=1", "checkpoint.every_steps=3"});
  std::vector<std::string> rank_args;
  if (backend_memory) rank_args = {"--staged-backend-memory", "1"};
  return run_job(ranks, dir.path(), settings, kOddBuckets, std::chrono::seconds(120), rank_args);
}

}  // namespace

TEST_CASE("data parallel: gradients kept in backend memory (the nccl path) give the host-staged bits",
          "[dp][backend_memory]") {
  for (int ranks : {2, 3}) {
    for (int zero : {0, 2}) {
      INFO(ranks << " replicas, ZeRO " << zero);
      const JobRun host = run_on_scrambled_device(ranks, zero, false);
      const JobRun device = run_on_scrambled_device(ranks, zero, true);
      INFO(host.report << device.report);
      REQUIRE(host.ok);
      REQUIRE(device.ok);
      REQUIRE(host.replicas.size() == static_cast<size_t>(ranks));
      REQUIRE(device.replicas.size() == static_cast<size_t>(ranks));
      const auto& reference = host.replicas[0];
      REQUIRE(reference.losses.size() == static_cast<size_t>(kSteps));
      REQUIRE(reference.val_losses.size() == 2);
      REQUIRE(reference.params_sha256.size() == 64);
      CHECK(reference.losses.back() < reference.losses.front());
      for (const auto& replica : device.replicas) {
        CHECK(replica.params_sha256 == reference.params_sha256);
        CHECK(replica.losses == reference.losses);
        CHECK(replica.grad_norms == reference.grad_norms);
        CHECK(replica.val_losses == reference.val_losses);
        CHECK(replica.comm_bytes_sent > 0);
      }
    }
  }
}
