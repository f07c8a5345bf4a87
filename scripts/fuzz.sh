#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-14, ASan + UBSan) in build-fuzz/ and runs
# each for DSEEK_FUZZ_SECONDS (default 10) on its seed corpus: ctest label `fuzz`.
# Usage: scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
cmake -S . -B build-fuzz -DDSEEK_FUZZ=ON -DDSEEK_WITH_CUDA=OFF -DDSEEK_FUZZ_SECONDS="$seconds" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-fuzz -j "${DSEEK_BUILD_JOBS:-2}"
ctest --test-dir build-fuzz -L fuzz --output-on-failure --no-tests=error
