// A group of ranks as the collectives see it: its members' world ranks in group order,
// this process's position, each member's host, and the tag context that keeps its
// messages apart from other groups sharing the same transport. Also the one rule for
// splitting a buffer of any length into per-rank shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dseek::comm {

struct GroupInfo {
  uint32_t context = 0;
  std::vector<int> members;        // group rank -> world rank
  int index = 0;                   // this process's group rank
  std::vector<std::string> hosts;  // group rank -> host name

  int size() const { return static_cast<int>(members.size()); }
  int world_of(int group_rank) const { return members[static_cast<size_t>(group_rank)]; }
};

// Shard r of `count` elements over `ranks` ranks: as even as possible, the first
// count % ranks shards one element longer. Shards may be empty when count < ranks.
inline size_t shard_count(size_t count, int ranks, int r) {
  const size_t n = static_cast<size_t>(ranks);
  return count / n + (static_cast<size_t>(r) < count % n ? 1 : 0);
}
inline size_t shard_offset(size_t count, int ranks, int r) {
  const size_t n = static_cast<size_t>(ranks), i = static_cast<size_t>(r);
  return i * (count / n) + (i < count % n ? i : count % n);
}

}  // namespace dseek::comm
