// Data-parallel training as the node's worker runs it (dist::run_layout, the world as the
// data group), in separate processes on loopback: 2 and 3 replicas follow the single-node
// loss curve of the same global batch, every replica ends with the same parameters bit for bit, ZeRO
// 0, 1 and 2 agree, a sharded checkpoint resumes bit for bit, top-k + INT8 compression
// cuts the bytes on the wire by >= 90% while the loss still falls (with ZeRO 1 and 2
// too), and impossible settings are refused naming their keys.
//
// Tolerances. Replicas sum the same per-sequence gradients as the single node, in a
// different order (each replica accumulates its slice, then the data plane adds the
// replicas), so the gradients differ by float rounding (~1e-7 relative) and the
// difference grows slowly through AdamW; 12 steps of the tiny model stay far below the
// 1e-4 relative bound on the loss that the test allows. ZeRO 1 and 2 run the same
// reduce-scatters (bit-identical to each other at any size); ZeRO 0's all-reduce adds
// two replicas' values in either order, which is exact, so at 2 replicas all three
// stages are bit-identical; at 3 replicas ZeRO 0 (all-reduce algorithm) and ZeRO 1/2
// (ring reduce-scatter) may add in different orders: 1e-4 relative on the loss.
#include <catch2/catch.hpp>

#include <map>
#include <memory>

#include "dp/dp_job.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::dp;
using Catch::Matchers::Contains;

namespace {

constexpr double kLossTolerance = 1e-4;  // relative, see the header comment
constexpr size_t kSmallBuckets = 64 * 1024;  // the tiny model in 4 buckets (overlap exercised)

// Runs that several test cases compare against, each done once per test process.
const JobRun& cached_run(const std::string& name, int ranks, const std::vector<std::string>& extra,
                         size_t bucket_bytes = kSmallBuckets) {
  static std::map<std::string, JobRun> runs;
  static std::vector<std::unique_ptr<ScratchDir>> dirs;
  auto it = runs.find(name);
  if (it != runs.end()) return it->second;
  dirs.push_back(std::make_unique<ScratchDir>("dp-" + name));
  JobRun run = run_job(ranks, dirs.back()->path(), tiny_settings(extra), bucket_bytes);
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.replicas.size()) == ranks);
  return runs.emplace(name, std::move(run)).first->second;
}

const JobRun& single_node() { return cached_run("single", 1, {}); }

void require_identical_replicas(const JobRun& run) {
  INFO(run.report);
  const auto& first = run.replicas.front();
  REQUIRE(first.losses.size() == 12);
  REQUIRE(first.params_sha256.size() == 64);
  for (const auto& replica : run.replicas) {
    CHECK(replica.params_sha256 == first.params_sha256);
    CHECK(replica.losses == first.losses);  // the reported loss is the global mean everywhere
    CHECK(replica.val_losses == first.val_losses);
  }
}

}  // namespace

TEST_CASE("data parallel: 2 and 3 replicas follow the single-node loss curve", "[dp]") {
  const JobRun& single = single_node();
  REQUIRE(single.replicas[0].losses.size() == 12);
  for (int ranks : {2, 3}) {
    const JobRun& run = cached_run("zero0-" + std::to_string(ranks), ranks, {"parallel.zero=0"});
    require_identical_replicas(run);
    const double loss_error = max_relative_difference(run.replicas[0].losses, single.replicas[0].losses);
    const double val_error = max_relative_difference(run.replicas[0].val_losses, single.replicas[0].val_losses);
    WARN(ranks << " replicas: max relative loss difference to one node " << loss_error
               << ", val_loss " << val_error << ", job " << run.elapsed.count() << " ms");
    CHECK(loss_error <= kLossTolerance);
    CHECK(val_error <= kLossTolerance);
    // The first step sees the same parameters and the same global batch: same loss.
    CHECK(run.replicas[0].losses[0] == Approx(single.replicas[0].losses[0]).epsilon(1e-12));
    CHECK(run.replicas[0].losses.back() < run.replicas[0].losses.front());
    CHECK(run.replicas[0].comm_bytes_sent > 0);
    CHECK(run.replicas[0].grad_bytes > 0);
  }
}

TEST_CASE("data parallel: ZeRO 0, 1 and 2 agree", "[dp]") {
  for (int ranks : {2, 3}) {
    const std::string n = std::to_string(ranks);
    const JobRun& zero0 = cached_run("zero0-" + n, ranks, {"parallel.zero=0"});
    const JobRun& zero1 = cached_run("zero1-" + n, ranks, {"parallel.zero=1"});
    const JobRun& zero2 = cached_run("zero2-" + n, ranks, {"parallel.zero=2"});
    require_identical_replicas(zero1);
    require_identical_replicas(zero2);
    INFO(ranks << " replicas");
    // Stages 1 and 2 run the same reductions, only started at different times.
    CHECK(zero1.replicas[0].params_sha256 == zero2.replicas[0].params_sha256);
    CHECK(zero1.replicas[0].losses == zero2.replicas[0].losses);
    const double error = max_relative_difference(zero1.replicas[0].losses, zero0.replicas[0].losses);
    WARN(ranks << " replicas: ZeRO 1/2 vs 0 max relative loss difference " << error);
    CHECK(error <= kLossTolerance);
    if (ranks == 2) {  // a + b == b + a: every stage gives the same bits
      CHECK(zero0.replicas[0].params_sha256 == zero1.replicas[0].params_sha256);
      CHECK(zero0.replicas[0].losses == zero1.replicas[0].losses);
      CHECK(zero0.replicas[0].grad_norms == zero1.replicas[0].grad_norms);
    }
  }
}

TEST_CASE("data parallel: a ZeRO 2 run stopped and resumed ends with the same parameters", "[dp]") {
  const JobRun& whole = cached_run("zero2-2", 2, {"parallel.zero=2"});
  ScratchDir dir("dp-resume");
  auto first = run_job(2, dir.path(), tiny_settings({"parallel.zero=2", "train.stop_after_steps=5"}),
                       kSmallBuckets);
  INFO(first.report);
  REQUIRE(first.ok);
  REQUIRE(first.replicas[0].losses.size() == 5);
  std::filesystem::remove_all(dir.path() / "rendezvous");
  auto second = run_job(2, dir.path(), tiny_settings({"parallel.zero=2", "checkpoint.resume=\"latest\""}),
                        kSmallBuckets);
  INFO(second.report);
  REQUIRE(second.ok);
  // The events file is appended to: the second invocation's steps 6..12 follow.
  REQUIRE(second.replicas[0].losses.size() == 12);
  for (const auto& replica : second.replicas) CHECK(replica.params_sha256 == whole.replicas[0].params_sha256);
  CHECK(second.replicas[0].losses == whole.replicas[0].losses);
}

TEST_CASE("data parallel: top-k 5% + INT8 cuts the bytes on the wire by at least 90%", "[dp]") {
  const JobRun& plain = cached_run("zero0-2", 2, {"parallel.zero=0"});
  // The codec's bytes alone: the second-moment refreshes (half a gradient each, every 20
  // steps by default) are the next test's; over 12 steps one refresh would be 4% of them.
  const JobRun& packed = cached_run("topk-int8-2", 2,
                                    {"parallel.zero=0", "comm.compression=\"topk+int8\"",
                                     "comm.topk_fraction=0.05", "comm.variance_refresh_steps=0"});
  require_identical_replicas(packed);
  uint64_t plain_bytes = 0, packed_bytes = 0;
  for (const auto& replica : plain.replicas) plain_bytes += replica.comm_bytes_sent;
  for (const auto& replica : packed.replicas) packed_bytes += replica.comm_bytes_sent;
  const double saved = 1.0 - static_cast<double>(packed_bytes) / static_cast<double>(plain_bytes);
  const auto& losses = packed.replicas[0].losses;
  WARN("bytes sent by 2 replicas over 12 steps: " << plain_bytes << " uncompressed, " << packed_bytes
                                                  << " with topk+int8 (" << saved * 100 << "% saved); loss "
                                                  << losses.front() << " -> " << losses.back());
  CHECK(saved >= 0.90);
  CHECK(packed.replicas[0].grad_encoded_bytes * 10 <= packed.replicas[0].grad_bytes);
  CHECK(losses.back() < losses.front() - 0.2);
}

TEST_CASE("data parallel: compressed training refreshes AdamW's second moment from local gradients",
          "[dp]") {
  const JobRun& packed = cached_run("topk-int8-2", 2,
                                    {"parallel.zero=0", "comm.compression=\"topk+int8\"",
                                     "comm.topk_fraction=0.05", "comm.variance_refresh_steps=0"});
  const JobRun& refreshed = cached_run("topk-int8-refresh-2", 2,
                                       {"parallel.zero=0", "comm.compression=\"topk+int8\"",
                                        "comm.topk_fraction=0.05", "comm.variance_refresh_steps=4"});
  // The averaged estimate is bit-identical on every replica, so the parameters are too.
  require_identical_replicas(refreshed);
  const auto& losses = refreshed.replicas[0].losses;
  CHECK(losses.back() < losses.front() - 0.2);
  // The first step is the same (the update differs from its end on); then the optimizer
  // runs on another second moment.
  CHECK(losses[0] == packed.replicas[0].losses[0]);
  CHECK(losses[1] != packed.replicas[0].losses[1]);
  // Refreshes at steps 0, 4 and 8, each a ring all-reduce of the estimate in bf16 (2 bytes
  // per parameter, + the mass): on 2 replicas each sends half of it in the reduce-scatter
  // and half in the all-gather. The rest of the traffic is the same as without them, byte
  // for byte.
  const uint64_t params = refreshed.replicas[0].grad_bytes / 12 / sizeof(float);
  const uint64_t message = 2 * (params + 1);
  for (size_t r = 0; r < 2; ++r)
    CHECK(refreshed.replicas[r].comm_bytes_sent == packed.replicas[r].comm_bytes_sent + 3 * message);
}

TEST_CASE("data parallel: compression starts after comm.compression_warmup_steps", "[dp]") {
  const JobRun& plain = cached_run("zero0-2", 2, {"parallel.zero=0"});
  const JobRun& warmed = cached_run("topk-int8-warm-2", 2,
                                    {"parallel.zero=0", "comm.compression=\"topk+int8\"",
                                     "comm.topk_fraction=0.05", "comm.compression_warmup_steps=4"});
  require_identical_replicas(warmed);
  // The warm-up steps are reduced exactly as without compression: the same losses, bit
  // for bit; afterwards the codec runs.
  const auto& losses = warmed.replicas[0].losses;
  REQUIRE(losses.size() == plain.replicas[0].losses.size());
  for (size_t step = 0; step < 5; ++step) CHECK(losses[step] == plain.replicas[0].losses[step]);
  CHECK(losses[6] != plain.replicas[0].losses[6]);
  // 4 of 12 steps whole, 8 at <= 10%: between 4/12 and (4 + 0.8)/12 of the raw bytes.
  const double encoded = static_cast<double>(warmed.replicas[0].grad_encoded_bytes) /
                         static_cast<double>(warmed.replicas[0].grad_bytes);
  CHECK(encoded >= 4.0 / 12.0);
  CHECK(encoded <= 4.8 / 12.0);
}

TEST_CASE("data parallel: settings that cannot run are refused naming their keys", "[dp]") {
  SECTION("a batch that does not split over the replicas") {
    ScratchDir dir("dp-bad-batch");
    auto run = run_job(2, dir.path(), tiny_settings({"train.batch_size=9", "train.micro_batch_size=0"}));
    CHECK_FALSE(run.ok);
    CHECK_THAT(run.report, Contains("train.batch_size (9) must be divisible by cluster.nodes (2)"));
  }
  SECTION("a slice that does not split into micro-batches") {
    ScratchDir dir("dp-bad-micro");
    auto run = run_job(2, dir.path(), tiny_settings({"train.micro_batch_size=4"}));
    CHECK_FALSE(run.ok);
    CHECK_THAT(run.report, Contains("train.micro_batch_size (4) must divide each node's slice"));
  }
}

// Compression composes with ZeRO: every replica decodes the whole bucket's sum from the
// codec's messages and uses its pieces of it, the optimizer state stays sharded. With
// AdamW's own second moment (comm.variance_refresh_steps = 0) the update is element-wise
// and the norm adds the same pieces in the same order, so ZeRO 1 and 2 give the bits of
// ZeRO 0; the codec's bytes are the same too (ZeRO only adds the parameters' all-gather).
// With the refreshed second moment each replica caps the update of its own pieces
// (optim/adamw.hpp), so those runs are compared by their loss curve only.
TEST_CASE("data parallel: compression with ZeRO 1 and 2 matches ZeRO 0 bit for bit", "[dp][zero]") {
  const std::vector<std::string> codec = {"comm.compression=\"topk+int8\"", "comm.topk_fraction=0.05",
                                          "comm.variance_refresh_steps=0"};
  const JobRun& zero0 = cached_run("topk-int8-2", 2, {"parallel.zero=0", codec[0], codec[1], codec[2]});
  for (const char* zero : {"parallel.zero=1", "parallel.zero=2"}) {
    INFO(zero);
    const JobRun& sharded = cached_run(std::string("topk-int8-") + zero, 2, {zero, codec[0], codec[1], codec[2]});
    require_identical_replicas(sharded);
    CHECK(sharded.replicas[0].losses == zero0.replicas[0].losses);
    CHECK(sharded.replicas[0].params_sha256 == zero0.replicas[0].params_sha256);
    CHECK(sharded.replicas[0].grad_encoded_bytes == zero0.replicas[0].grad_encoded_bytes);
    CHECK(sharded.replicas[0].grad_encoded_bytes * 10 <= sharded.replicas[0].grad_bytes);
  }
  const JobRun& refreshed = cached_run("topk-int8-refresh-zero2", 2,
                                       {"parallel.zero=2", codec[0], codec[1], "comm.variance_refresh_steps=4"});
  require_identical_replicas(refreshed);
  const auto& losses = refreshed.replicas[0].losses;
  CHECK(losses.back() < losses.front() - 0.2);
}
