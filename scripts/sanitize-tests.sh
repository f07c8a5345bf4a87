#!/usr/bin/env bash
# Builds dseek with AddressSanitizer and UndefinedBehaviorSanitizer (DSEEK_SANITIZE=ON)
# in build-asan/ and runs the unit tests there (the whole suite under ASan is slower than
# CI allows: this is the documented run). Extra arguments go to ctest; without any, only
# dseek_unit_tests is built (what -L unit runs), not the whole tree.
# Usage: scripts/sanitize-tests.sh [ctest args, default -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DDSEEK_SANITIZE=ON -DDSEEK_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
targets=()
if [ $# -eq 0 ]; then targets=(--target dseek_unit_tests); fi
cmake --build build-asan -j "${DSEEK_BUILD_JOBS:-2}" "${targets[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ $# -eq 0 ]; then set -- -L unit; fi
ctest --test-dir build-asan --output-on-failure --no-tests=error "$@"
