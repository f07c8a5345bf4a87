#!/usr/bin/env bash
# Configures and builds dseek into build/ (Release, Ninja, ccache when present).
# Usage: scripts/build.sh [extra cmake -D options...]
#   DSEEK_WITH_CUDA=AUTO|ON|OFF picks the CUDA backend (AUTO: on where nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DSEEK_BUILD_DIR:-build}
jobs=${DSEEK_BUILD_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DDSEEK_WITH_CUDA="${DSEEK_WITH_CUDA:-AUTO}" "$@"
cmake --build "$build_dir" -j "$jobs"
