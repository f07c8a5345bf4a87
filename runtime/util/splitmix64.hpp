// SplitMix64 (Steele, Lea, Flood 2014): the 64-bit mixer the counter-based random numbers
// use (weight init: model/init_rng.hpp; the sample order), and its stateful form, a
// stream of numbers from a seed (MinHash's permutations, the FIM cuts).
#pragma once

#include <cstdint>

namespace dseek::util {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The next number of the stream whose position is `state` (advanced).
inline uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t value = splitmix64(state);
  state += 0x9e3779b97f4a7c15ull;
  return value;
}

}  // namespace dseek::util
