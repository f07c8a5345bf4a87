// Byte counters of the gradient codecs: what a codec was given (raw fp32 bytes) and what
// went on the wire (encoded bytes), per direction. A Codec keeps one set for the messages
// it encoded (sent) and one for those it decoded (received); the compressed all-reduce
// reads them per operation and the metrics exporter reports them.
#pragma once

#include <atomic>
#include <cstdint>

namespace dseek::comm::compression {

struct TrafficCounters {
  uint64_t raw_bytes = 0;      // n * sizeof(float) of every message
  uint64_t encoded_bytes = 0;  // bytes of the encoded messages, headers included
  uint64_t messages = 0;

  // raw / encoded: 20 means the wire carried 1/20 of the fp32 bytes. 1 when empty.
  [[nodiscard]] double compression_ratio() const {
    return encoded_bytes == 0 ? 1.0
                              : static_cast<double>(raw_bytes) / static_cast<double>(encoded_bytes);
  }
  // 1 - encoded / raw: the fraction of the fp32 bytes the codec saved (0.95 = 95% fewer).
  [[nodiscard]] double saved_fraction() const {
    return raw_bytes == 0 ? 0.0
                          : 1.0 - static_cast<double>(encoded_bytes) / static_cast<double>(raw_bytes);
  }

  TrafficCounters& operator+=(const TrafficCounters& o) {
    raw_bytes += o.raw_bytes;
    encoded_bytes += o.encoded_bytes;
    messages += o.messages;
    return *this;
  }
  friend TrafficCounters operator-(TrafficCounters a, const TrafficCounters& b) {
    a.raw_bytes -= b.raw_bytes;
    a.encoded_bytes -= b.encoded_bytes;
    a.messages -= b.messages;
    return a;
  }
  friend bool operator==(const TrafficCounters&, const TrafficCounters&) = default;
};

// The live counters inside a codec: relaxed atomics, so that several threads may decode
// peers' messages with one codec at once. Read a consistent-enough copy with snapshot().
class AtomicTrafficCounters {
 public:
  void add(uint64_t raw, uint64_t encoded) {
    raw_bytes_.fetch_add(raw, std::memory_order_relaxed);
    encoded_bytes_.fetch_add(encoded, std::memory_order_relaxed);
    messages_.fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] TrafficCounters snapshot() const {
    return {raw_bytes_.load(std::memory_order_relaxed), encoded_bytes_.load(std::memory_order_relaxed),
            messages_.load(std::memory_order_relaxed)};
  }
  void reset() {
    raw_bytes_.store(0, std::memory_order_relaxed);
    encoded_bytes_.store(0, std::memory_order_relaxed);
    messages_.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> raw_bytes_{0};
  std::atomic<uint64_t> encoded_bytes_{0};
  std::atomic<uint64_t> messages_{0};
};

}  // namespace dseek::comm::compression
