// Implementation of memory_placement.hpp.
#include "runtime/train/layout/memory_placement.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

namespace dseek::train {

std::string encode_holdings(const std::vector<StageHolding>& holdings) {
  std::string text;
  for (const StageHolding& h : holdings) {
    if (!text.empty()) text += ';';
    text += std::to_string(h.pipeline) + ',' + std::to_string(h.tensor) + ',' +
            std::to_string(h.stage) + ',' + std::to_string(h.tensor_rank) + ',' +
            std::to_string(h.steps_done);
  }
  return text;
}

std::vector<StageHolding> decode_holdings(const std::string& payload) {
  std::vector<StageHolding> holdings;
  std::istringstream entries(payload);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    StageHolding h;
    char c1 = 0, c2 = 0, c3 = 0, c4 = 0;
    std::istringstream fields(entry);
    if (!(fields >> h.pipeline >> c1 >> h.tensor >> c2 >> h.stage >> c3 >> h.tensor_rank >> c4 >>
          h.steps_done) ||
        c1 != ',' || c2 != ',' || c3 != ',' || c4 != ',' || h.pipeline < 1 || h.tensor < 1 ||
        h.stage < 0 || h.stage >= h.pipeline || h.tensor_rank < 0 || h.tensor_rank >= h.tensor)
      return {};
    holdings.push_back(h);
  }
  return holdings;
}

std::vector<int32_t> place_by_memory(const std::vector<std::vector<StageHolding>>& holdings,
                                     const SurvivorLayout& layout) {
  const int ranks = layout.ranks();
  std::vector<int32_t> order(static_cast<size_t>(ranks));
  std::iota(order.begin(), order.end(), 0);
  const int positions = layout.pipeline * layout.tensor;
  std::set<int64_t, std::greater<>> steps;
  for (const auto& held : holdings)
    for (const StageHolding& h : held)
      if (h.pipeline == layout.pipeline && h.tensor == layout.tensor && h.steps_done >= 0)
        steps.insert(h.steps_done);
  for (const int64_t step : steps) {
    // The ranks holding each position at `step`, lowest first.
    std::vector<std::vector<int32_t>> holders(static_cast<size_t>(positions));
    for (size_t r = 0; r < holdings.size(); ++r)
      for (const StageHolding& h : holdings[r])
        if (h.pipeline == layout.pipeline && h.tensor == layout.tensor && h.steps_done == step)
          holders[static_cast<size_t>(h.stage * layout.tensor + h.tensor_rank)].push_back(static_cast<int32_t>(r));
    if (std::any_of(holders.begin(), holders.end(), [](const auto& h) { return h.empty(); })) continue;
    std::vector<int32_t> placed(static_cast<size_t>(ranks), -1);
    std::vector<bool> used(holdings.size(), false);
    for (int position = 0; position < positions; ++position) {
      const int stage = position / layout.tensor, tensor_rank = position % layout.tensor;
      int replica = 0;
      for (const int32_t r : holders[static_cast<size_t>(position)]) {
        if (replica >= layout.data) break;
        if (used[static_cast<size_t>(r)]) continue;
        used[static_cast<size_t>(r)] = true;
        placed[static_cast<size_t>((replica * layout.pipeline + stage) * layout.tensor + tensor_rank)] = r;
        ++replica;
      }
    }
    size_t next = 0;
    for (int32_t& slot : placed) {
      if (slot >= 0) continue;
      while (next < used.size() && used[next]) ++next;
      if (next == used.size()) break;  // fewer ranks than the layout: leave the plan's order
      used[next] = true;
      slot = static_cast<int32_t>(next);
    }
    if (std::find(placed.begin(), placed.end(), -1) != placed.end()) return order;
    return placed;
  }
  return order;
}

}  // namespace dseek::train
