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
if [ $# -eq 0 ]; then
  status=0
  ctest --output-on-failure --no-tests=error --timeout 900 -LE slurm || status=$?
  if [ "$status" -ne 0 ]; then
    # A long failure message is cut in the middle by log viewers that keep a log's start
    # and end: the end of each failed test's output again, last.
    echo "=== the last 120 lines of each failed test's output ==="
    awk '/^[0-9]+\/[0-9]+ Testing: /{name=$0; n=0; next}
         /^Output:$/{keep=1; next} /^<end of output>$/{keep=0; next}
         keep{line[n++]=$0}
         /^Test Failed\.$/{print "--- " name; for (i = (n > 120 ? n - 120 : 0); i < n; i++) print line[i]}' \
      Testing/Temporary/LastTest.log
    exit "$status"
  fi
  # The slurm label drives a real slurmctld and slurmd on this machine, whose requeue
  # timing is Slurm's: a failed test there runs once more (ctest prints both runs; the
  # requeue test failed 2 of 4 runs on 2026-12-03 with the requeued run not ending in
  # 90 s, cause not found yet: docs/testing.md).
  ctest --output-on-failure --no-tests=error --timeout 900 -L slurm --repeat until-pass:2
else
  ctest --output-on-failure --no-tests=error --timeout 900 "$@"
fi
cd ..
if [ $# -eq 0 ]; then scripts/fuzz.sh 10; fi
