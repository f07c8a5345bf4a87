#!/usr/bin/env bash
# One call of the lent GPU machine, prepared: what the machine is, then bench/gpu/check.sh
# on it, then everything packed into the few files such a call brings back.
#
#   here:   scripts/make_gpu_bundle.sh             (gpu-bundle.tar.xz, ~11 MiB)
#   there:  bench/gpu/device_session.sh [--budget SECONDS] [check.sh arguments...]
#           with gpu-bundle.tar.xz carried to the repository root and $OUT set (the device
#           tool does both: carry ["gpu-bundle.tar.xz"]).
#
# $OUT receives at most four files (the device tool brings back eight): machine.txt
# (nvidia-smi, CPU, driver), gpu_check.txt and gpu_check.json (check.sh's table), and
# logs.tar.gz (every row's log and the parallel runs' event files; the prepared data
# shards left out). --budget (default 380 s) bounds check.sh as a whole, so the call ends
# inside the device tool's limit with its files written.
set -uo pipefail
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:?"device_session.sh: \$OUT is not set (the device tool sets it)"}
budget=380
if [[ ${1:-} == --budget ]]; then budget=$2; shift 2; fi
work=/tmp/dseek-device-session
rm -rf "$work" && mkdir -p "$work/check"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
  echo "glibc: $(ldd --version | head -n 1)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>&1 | grep release)"
  nvidia-smi 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv 2>&1
} >"$out/machine.txt"

bash "$repo_root/bench/gpu/check.sh" --budget "$budget" --out "$work/check" "$@"
code=$?
cp "$work/check/gpu_check.txt" "$work/check/gpu_check.json" "$out/" 2>/dev/null
tar -C "$work" --exclude='check/parallel-data' --exclude='*.bin' -czf "$out/logs.tar.gz" check
echo "device_session.sh: check.sh exit $code; logs in logs.tar.gz"
exit $code
