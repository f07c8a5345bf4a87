#!/usr/bin/env bash
# Side-by-side all-reduce bandwidth on one host: `dseek bench allreduce` (UCX data plane)
# against OpenMPI's MPI_Allreduce (bench/peers/mpi_allreduce.c) and torch.distributed's
# Gloo backend (bench/peers/gloo_allreduce.py), plus one-thread memcpy as the ceiling.
#
#   bench/allreduce_vs_mpi.sh [--ranks "2 4"] [--sizes 4K,64K,1M,4M,16M,64M] [--runs 5]
#                             [--iters 20] [--warmup 5] [--no-gloo]
#
# fp32 sum, in place. Every peer times alike: warm-up calls, then each timed call after a
# barrier, a call's time = the slowest rank's, median over iters; busbw = 2(N-1)/N x
# bytes / time (nccl-tests). Placement is alike: mpirun binds each rank to a core up to 2
# ranks, `dseek bench allreduce` (--bind core, its default) whenever there is a core per
# rank; more ranks than cores oversubscribe (mpirun --oversubscribe).
#
# Pairs, for a shared, noisy machine: each run, for each rank count and each size, is one
# dseek process and one OpenMPI job back to back (same size, same pinning), in the order
# AB in even runs and BA in odd ones; then Gloo over all sizes (--no-gloo skips it: it is
# 10x slower and takes most of the time), then memcpy. A load swing that lasts a few seconds hits both halves of a pair
# alike, so besides the medians over runs of each side's busbw (and their ratio) the
# table shows the MEDIAN OF THE PER-PAIR RATIOS dseek/OpenMPI, with their range: quote
# that one. The load average is printed at the start and the end: quote it with the
# figures. The output is meant to be pasted into bench/RESULTS.md. Exits non-zero if a
# run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks="2 4" sizes=4K,64K,1M,4M,16M,64M runs=5 iters=20 warmup=5 gloo=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --no-gloo) gloo=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
py=/usr/bin/python3  # Debian's python3-torch is visible to this interpreter only
[[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
  { echo "mpicc/mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }

tmp=$(mktemp -d -t allreduce-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_allreduce" bench/peers/mpi_allreduce.c

# K/M/G suffixes to bytes, for the peers that take plain numbers.
bytes=$("$py" -c '
import sys
m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
print(",".join(str(int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)) for s in sys.argv[1].split(",")))' "$sizes")

results=$tmp/results.jsonl
timeout_s=300
run_peer() {  # run_peer NAME RANKS RUN [BYTES]: one run of one side (all sizes, or BYTES), its JSON lines (tagged with RUN) appended to $results
  local name=$1 n=$2 run=$3 bytes=${4:-$bytes} out=$tmp/out.txt
  case $name in
    dseek) timeout "$timeout_s" "$dseek" bench allreduce --ranks "$n" --bytes "$bytes" --iters "$iters" \
             --warmup "$warmup" --timeout "$timeout_s" >"$out" ;;
    openmpi) timeout "$timeout_s" mpirun --allow-run-as-root --oversubscribe -np "$n" \
               "$tmp/mpi_allreduce" --bytes "$bytes" --iters "$iters" --warmup "$warmup" >"$out" ;;
    gloo) OMP_NUM_THREADS=1 timeout "$timeout_s" "$py" bench/peers/gloo_allreduce.py --ranks "$n" \
            --bytes "$bytes" --iters "$iters" --warmup "$warmup" >"$out" ;;
    memcpy) timeout 60 "$dseek" bench allreduce --memcpy-bytes 64M --iters "$iters" >"$out" ;;
  esac || { echo "$name at $n ranks failed:" >&2; cat "$out" >&2; exit 1; }
  grep '^{' "$out" | sed "s/^{/{\"run\":$run,/" >>"$results" ||
    { echo "$name at $n ranks printed no result" >&2; exit 1; }
}

echo "# dseek vs OpenMPI vs Gloo all-reduce (fp32 sum, in place, one host), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc)"
echo "OpenMPI $(mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) //p' | head -1)," \
     "PyTorch $("$py" -c 'import torch; print(torch.__version__)') (gloo), UCX $(ucx_info -v 2>/dev/null | sed -n "s/^# Version //p" | head -1)"
echo "sizes $sizes; ranks $ranks; $runs runs per side, dseek and OpenMPI in pairs per size (AB, BA, ...)$([[ $gloo == 1 ]] && echo ", then Gloo"); $warmup warm-up + $iters timed calls per size"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

start=$SECONDS
for ((r = 0; r < runs; r++)); do
  for n in $ranks; do
    for b in ${bytes//,/ }; do  # a pair per size: its two halves run within a second or so
      if ((r % 2 == 0)); then run_peer dseek "$n" "$r" "$b"; run_peer openmpi "$n" "$r" "$b"
      else run_peer openmpi "$n" "$r" "$b"; run_peer dseek "$n" "$r" "$b"; fi
    done
    if [[ $gloo == 1 ]]; then run_peer gloo "$n" "$r"; fi
  done
  run_peer memcpy 1 "$r"
  echo "run $((r + 1))/$runs done ($((SECONDS - start)) s)" >&2
done

"$py" - "$results" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bw = collections.defaultdict(list)      # (impl, ranks, bytes) -> busbw of every run
by_run = {}                             # (impl, ranks, bytes, run) -> busbw
times = collections.defaultdict(list)   # (impl, ranks, bytes) -> median time of every run
memcpy = [r["gbps"] for r in rows if r["bench"] == "memcpy"]
for r in rows:
    if r["bench"] == "allreduce":
        key = (r["impl"], r["ranks"], r["bytes"])
        bw[key].append(r["busbw_gbps"])
        times[key].append(r["time_us_median"])
        by_run[key + (r["run"],)] = r["busbw_gbps"]
med = {k: statistics.median(v) for k, v in bw.items()}
mc = statistics.median(memcpy)
# dseek/OpenMPI of each pair (the two ran back to back): the noise-robust figure.
pairs = collections.defaultdict(list)
for (impl, ranks, b, run), d in by_run.items():
    m = by_run.get(("openmpi", ranks, b, run))
    if impl == "dseek" and m:
        pairs[(ranks, b)].append(d / m)
def size(b):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s} {unit}iB"
    return f"{b} B"
def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"
print(f"memcpy 64 MiB, one thread: {mc:.2f} GB/s (median of {len(memcpy)} runs: "
      + ", ".join(f"{x:.2f}" for x in memcpy) + ")")
print()
print("busbw GB/s, median over runs (2(N-1)/N x bytes / time); pair ratio = median over runs of")
print("dseek/OpenMPI within each back-to-back pair [min-max]")
print()
print("| ranks | size | dseek | OpenMPI | Gloo | pair ratio dseek/OpenMPI | ratio of medians | dseek/Gloo | dseek/memcpy |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for ranks, b in sorted({(k[1], k[2]) for k in med}):
    d, m, g = (med.get((impl, ranks, b)) for impl in ("dseek", "openmpi", "gloo"))
    f = lambda x: f"{x:.3f}" if x is not None else "-"
    p = pairs.get((ranks, b))
    pr = f"**{statistics.median(p):.2f}** [{min(p):.2f}-{max(p):.2f}]" if p else "-"
    print(f"| {ranks} | {size(b)} | {f(d)} | {f(m)} | {f(g)} | {pr} | {ratio(d, m)} | {ratio(d, g)} | {ratio(d, mc)} |")
print()
print("median time per call, us (median over runs)")
print()
print("| ranks | size | dseek | OpenMPI | Gloo |")
print("|---:|---:|---:|---:|---:|")
for ranks, b in sorted({(k[1], k[2]) for k in times}):
    t = [times.get((impl, ranks, b)) for impl in ("dseek", "openmpi", "gloo")]
    print(f"| {ranks} | {size(b)} | " + " | ".join(f"{statistics.median(x):.1f}" if x else "-" for x in t) + " |")
PY
echo
echo "total $((SECONDS - start)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
