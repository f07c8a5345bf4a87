#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs the build and test
# dependencies (PyTorch is the numerical reference), builds, and runs every test with
# ctest. Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`. Without arguments
# (the whole suite, as CI runs it) the fuzz targets run too, 10 s each in their own
# clang build (scripts/fuzz.sh, ctest label fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
scripts/build.sh
cd build
# The tests start dseek-node themselves: run inside a Slurm job or a pod, those nodes must
# not take their ids from it (the slurm-labelled tests ask for it where they want it).
export DSEEK_CLUSTER_ENV=${DSEEK_CLUSTER_ENV:-none}
ctest --output-on-failure --no-tests=error --timeout 900 "$@"
cd ..
if [ $# -eq 0 ]; then scripts/fuzz.sh 10; fi
