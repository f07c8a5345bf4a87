// The SDC audit's pure parts (runtime/train/sdc_audit.hpp): the rotating pairing (every
// replica audited exactly once per audit, never by itself, by each other replica in
// turn; a second auditor distinct from both), the gather of 64-bit hashes over a data
// group, and the config keys that drive it (faults.where, faults.every_step,
// train.sdc_audit_every).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "runtime/config/load.hpp"
#include "runtime/train/layout/replica_group.hpp"
#include "runtime/train/sdc_audit.hpp"

namespace config = dseek::config;
namespace train = dseek::train;
using Catch::Matchers::Contains;

namespace {

// Replicas as threads of this process: sum() adds every thread's values, in replica order.
class ThreadReplicas {
 public:
  explicit ThreadReplicas(int replicas) : replicas_(replicas), inputs_(static_cast<size_t>(replicas)) {}
  class Group final : public train::ReplicaGroup {
   public:
    Group(ThreadReplicas& all, int replica) : all_(all), replica_(replica) {}
    int replica() const override { return replica_; }
    int replicas() const override { return all_.replicas_; }
    void sum(std::span<double> values) override { all_.sum(replica_, values); }
    void sum(float*, size_t) override { throw std::logic_error("not used here"); }
    std::unique_ptr<train::GradientReducer> make_gradient_reducer() override {
      throw std::logic_error("not used here");
    }

   private:
    ThreadReplicas& all_;
    int replica_;
  };

 private:
  void sum(int replica, std::span<double> values) {
    std::unique_lock lock(mutex_);
    inputs_[static_cast<size_t>(replica)].assign(values.begin(), values.end());
    const int64_t round = round_;
    if (++arrived_ == replicas_) {
      result_.assign(values.size(), 0.0);
      for (const auto& in : inputs_)
        for (size_t i = 0; i < in.size(); ++i) result_[i] += in[i];
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    std::copy(result_.begin(), result_.end(), values.begin());
  }

  int replicas_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<double>> inputs_;
  std::vector<double> result_;
  int arrived_ = 0;
  int64_t round_ = 0;
};

}  // namespace

TEST_CASE("sdc audit: every replica is audited once per audit, by each other replica in turn",
          "[sdc]") {
  for (int replicas = 3; replicas <= 8; ++replicas) {
    INFO(replicas << " replicas");
    std::vector<std::set<int>> auditors_of(static_cast<size_t>(replicas));
    for (int64_t audit = 0; audit < replicas - 1; ++audit) {
      std::set<int> audited;
      for (int auditor = 0; auditor < replicas; ++auditor) {
        const int target = train::audit_target(auditor, replicas, audit);
        CHECK(target != auditor);
        CHECK(train::first_auditor(target, replicas, audit) == auditor);
        const int second = train::second_auditor(target, replicas, audit);
        CHECK(second != target);
        CHECK(second != auditor);
        CHECK(second >= 0);
        CHECK(second < replicas);
        audited.insert(target);
        auditors_of[static_cast<size_t>(target)].insert(auditor);
      }
      CHECK(audited.size() == static_cast<size_t>(replicas));  // a permutation
    }
    // Over D - 1 audits every other replica has audited each one.
    for (const auto& auditors : auditors_of) CHECK(auditors.size() == static_cast<size_t>(replicas - 1));
  }
  CHECK(train::sdc_audit_due(10, 0));
  CHECK(train::sdc_audit_due(10, 20));
  CHECK_FALSE(train::sdc_audit_due(10, 21));
  CHECK_FALSE(train::sdc_audit_due(0, 0));
}

TEST_CASE("sdc audit: the replicas' 64-bit hashes gathered through the group's sum of doubles",
          "[sdc]") {
  constexpr int kReplicas = 3;
  const std::vector<std::vector<uint64_t>> mine = {
      {0xffffffffffffffffull, 1}, {0x0123456789abcdefull, 0}, {0x8000000000000000ull, 0xfedcba9876543210ull}};
  ThreadReplicas replicas(kReplicas);
  std::vector<std::vector<std::vector<uint64_t>>> gathered(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r)
    threads.emplace_back([&, r] {
      ThreadReplicas::Group group(replicas, r);
      gathered[static_cast<size_t>(r)] = train::gather_over_replicas(group, mine[static_cast<size_t>(r)]);
    });
  for (auto& t : threads) t.join();
  for (const auto& all : gathered) CHECK(all == mine);
}

TEST_CASE("config: corrupt_gradient's where and every_step, and train.sdc_audit_every", "[sdc][config]") {
  const auto job = config::load_config_text(
      "[train]\nsdc_audit_every = 7\nbatch_size = 12\n[cluster]\nnodes = 3\n"
      "[[faults]]\nkind = \"corrupt_gradient\"\nnode = 2\nstep = 4\nwhere = \"local\"\nevery_step = true\n",
      "x.toml");
  CHECK(job.train.sdc_audit_every == 7);
  REQUIRE(job.faults.size() == 1);
  CHECK(job.faults[0].where == config::FaultWhere::local);
  CHECK(job.faults[0].every_step);
  CHECK(config::load_config_text("", "x.toml").train.sdc_audit_every == 100);  // on by default
  std::string error;
  try {
    config::load_config_text("[[faults]]\nkind = \"kill\"\nstep = 1\nwhere = \"local\"\n", "x.toml");
  } catch (const config::ConfigError& e) {
    error = e.what();
  }
  CHECK_THAT(error, Contains("faults[0].where and .every_step apply to corrupt_gradient"));
  error.clear();
  try {
    config::load_config_text("[[faults]]\nkind = \"corrupt_gradient\"\nstep = 1\nwhere = \"gpu\"\n", "x.toml");
  } catch (const config::ConfigError& e) {
    error = e.what();
  }
  CHECK_THAT(error, Contains("x.toml:4:9: faults[0].where: expected one of reduced, local"));
}
