// PipelineLinks between the stages of one process (one thread per stage): what a test
// needs to run a whole pipeline without a data plane. A send copies its floats into the
// channel from its stage to the peer at once (done when posted); the k-th receive from a
// peer takes the k-th message on that channel. The collectives meet in the hub: each
// stage hands in its values, the last to arrive lets all of them take the result, summed
// in stage order (the same bits on every run). Every wait is bounded (kWait), so a test
// whose stages fall out of step fails instead of hanging.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/train/pipeline/links.hpp"

namespace dseek::testing {

class InMemoryPipelineHub {
 public:
  explicit InMemoryPipelineHub(int64_t stages) : stages_(stages) {}
  int64_t stages() const { return stages_; }

  void send(int64_t from, int64_t to, const float* data, size_t count) {
    std::lock_guard lock(mutex_);
    auto& channel = channels_[{from, to}];
    channel.messages.emplace(channel.sent++, std::vector<float>(data, data + count));
    changed_.notify_all();
  }
  // The index of the next receive on the channel from -> to.
  int64_t next_receive(int64_t from, int64_t to) {
    std::lock_guard lock(mutex_);
    return channels_[{from, to}].posted++;
  }
  void receive(int64_t from, int64_t to, int64_t index, float* data, size_t count) {
    std::unique_lock lock(mutex_);
    auto& channel = channels_[{from, to}];
    wait(lock, [&] { return channel.messages.count(index) > 0; }, "a message");
    auto message = std::move(channel.messages.at(index));
    channel.messages.erase(index);
    if (message.size() != count)
      throw std::runtime_error("in-memory link: " + std::to_string(message.size()) +
                               " floats sent, " + std::to_string(count) + " expected");
    std::copy(message.begin(), message.end(), data);
  }

  // Round `round` of collective `kind` among `members` stages: every member's values in
  // stage order, once all handed theirs in.
  std::vector<std::vector<double>> meet(int kind, int64_t round, int64_t stage,
                                        std::vector<double> values, size_t members) {
    std::unique_lock lock(mutex_);
    auto& meeting = meetings_[{kind, round}];
    meeting.values[stage] = std::move(values);
    changed_.notify_all();
    wait(lock, [&] { return meeting.values.size() == members; }, "a collective");
    std::vector<std::vector<double>> all;
    for (const auto& [s, v] : meeting.values) all.push_back(v);
    if (++meeting.taken == members) meetings_.erase({kind, round});
    return all;
  }

 private:
  static constexpr auto kWait = std::chrono::seconds(60);
  struct Channel {
    int64_t sent = 0, posted = 0;
    std::map<int64_t, std::vector<float>> messages;  // by index
  };
  struct Meeting {
    std::map<int64_t, std::vector<double>> values;  // by stage
    size_t taken = 0;
  };
  template <class Ready>
  void wait(std::unique_lock<std::mutex>& lock, Ready ready, const char* what) {
    if (!changed_.wait_for(lock, kWait, ready))
      throw std::runtime_error(std::string("in-memory link: no ") + what + " within 60 s");
  }

  int64_t stages_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int64_t, int64_t>, Channel> channels_;
  std::map<std::pair<int, int64_t>, Meeting> meetings_;
};

class InMemoryPipelineLinks final : public train::PipelineLinks {
 public:
  InMemoryPipelineLinks(InMemoryPipelineHub& hub, int64_t stage) : hub_(hub), stage_(stage) {}

  int64_t stage() const override { return stage_; }
  int64_t stages() const override { return hub_.stages(); }

  Handle post_send(const float* data, size_t count, int64_t peer) override {
    hub_.send(stage_, peer, data, count);
    return add({true, peer, 0, nullptr, 0});
  }
  Handle post_recv(float* data, size_t count, int64_t peer) override {
    return add({false, peer, hub_.next_receive(peer, stage_), data, count});
  }
  void wait(Handle handle) override {
    const Transfer transfer = transfers_.at(handle);
    transfers_.erase(handle);
    if (!transfer.send) hub_.receive(transfer.peer, stage_, transfer.index, transfer.data, transfer.count);
  }

  void sum_first_and_last(float* data, size_t count) override {
    sum(kFirstAndLast, std::span<float>(data, count), stages() > 1 ? 2 : 1);
  }
  void sum_over_stages(std::span<double> values) override { sum(kDoubles, values, stages()); }
  void sum_over_stages(std::span<float> values) override { sum(kFloats, values, stages()); }
  void broadcast_from_first(std::span<double> values) override {
    const auto all = hub_.meet(kBroadcast, rounds_[kBroadcast]++, stage_,
                               std::vector<double>(values.begin(), values.end()),
                               static_cast<size_t>(stages()));
    std::copy(all.front().begin(), all.front().end(), values.begin());  // stage 0's
  }

 private:
  enum Kind { kFirstAndLast, kDoubles, kFloats, kBroadcast, kKinds };
  struct Transfer {
    bool send;
    int64_t peer, index;
    float* data;
    size_t count;
  };
  Handle add(Transfer transfer) {
    transfers_.emplace(next_, transfer);
    return next_++;
  }
  // In stage order, in the element type (as a data plane's reduction adds floats).
  template <class T>
  void sum(Kind kind, std::span<T> values, int64_t members) {
    const auto all = hub_.meet(kind, rounds_[kind]++, stage_,
                               std::vector<double>(values.begin(), values.end()),
                               static_cast<size_t>(members));
    for (size_t i = 0; i < values.size(); ++i) {
      T total = static_cast<T>(all[0][i]);
      for (size_t s = 1; s < all.size(); ++s) total += static_cast<T>(all[s][i]);
      values[i] = total;
    }
  }

  InMemoryPipelineHub& hub_;
  int64_t stage_;
  std::map<Handle, Transfer> transfers_;
  Handle next_ = 0;
  int64_t rounds_[kKinds] = {};
};

}  // namespace dseek::testing
