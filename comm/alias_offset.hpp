// Placing a staging buffer half a page away from the user buffer it is reduced into.
//
// Why: a reduce loop loads from a staging buffer and stores into the output. When the
// output's address lies a little above the staging buffer's modulo 4 KiB (a std::vector's
// data sits 16 bytes past a page, pool buffers start on one), every load matches, in the
// low 12 address bits the core compares first, a store of the previous iteration still in
// flight, and waits for it to be checked ("4K aliasing"). Measured at 4 ranks, 1 MiB, on
// the Zen 2 machine of bench/RESULTS.md: the shared-memory all-reduce 2.5-5x slower with its
// slots on page boundaries and the output at 16 bytes past one. Half a page apart, a
// load never meets a store that recent.
//
// The caller leases kAliasSlack bytes more than it needs and receives at the returned
// address; the same offset within a page as `partner` plus half a page, so the two keep
// their alignment relative to each other (a memcpy between them stays aligned).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dseek::comm {

inline constexpr size_t kAliasSlack = 4096;

inline std::byte* half_page_apart(std::byte* base, const void* partner) {
  const auto b = reinterpret_cast<uintptr_t>(base), p = reinterpret_cast<uintptr_t>(partner);
  return base + ((p + kAliasSlack / 2 - b) % kAliasSlack);
}

}  // namespace dseek::comm
