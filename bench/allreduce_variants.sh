#!/usr/bin/env bash
# Paired runs of `dseek bench allreduce` under several environment settings (an all-reduce
# algorithm forced with DSEEK_COMM_ALLREDUCE, a wait policy with DSEEK_COMM_YIELD_US, ...),
# for choosing between them on a shared, noisy machine:
#
#   bench/allreduce_variants.sh --ranks 4 --sizes 256K,1M,4M --runs 7 \
#       rsag:DSEEK_COMM_ALLREDUCE=rsag halving:DSEEK_COMM_ALLREDUCE=halving [--openmpi]
#
# A variant is NAME:VAR=VALUE[,VAR=VALUE...] (NAME: alone runs the defaults). Each run, for
# each size, runs every variant back to back (the order rotates from run to run), plus
# OpenMPI's MPI_Allreduce with --openmpi (bench/peers/mpi_allreduce.c, as in
# bench/allreduce_vs_mpi.sh). Prints per variant and size the median over runs of the
# per-call median time, and the median of the per-run ratios time(first variant) /
# time(variant) with their range: above 1, the variant is faster than the first one.
# fp32 sum in place, the timing of `dseek bench allreduce`. Quote the load average printed.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=4 sizes=1M runs=5 iters=20 warmup=5 openmpi=0 variants=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --openmpi) openmpi=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *:*) variants+=("$1"); shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
((${#variants[@]} > 0)) || { echo "no variant given (NAME:VAR=VALUE,...)" >&2; exit 2; }
dseek=${DSEEK_BIN:-build/bin/dseek}
py=/usr/bin/python3
[[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
tmp=$(mktemp -d -t allreduce-variants-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ((openmpi)); then
  mpicc -O2 -o "$tmp/mpi_allreduce" bench/peers/mpi_allreduce.c
  variants+=("OpenMPI:")
fi
results=$tmp/results.jsonl

run_variant() {  # run_variant VARIANT RUN SIZE
  local name=${1%%:*} settings=${1#*:} out=$tmp/out.txt
  local -a env_args=()
  [[ -n $settings ]] && IFS=, read -r -a env_args <<<"$settings"
  if [[ $name == OpenMPI && $settings == "" ]] && ((openmpi)); then
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$tmp/mpi_allreduce" --bytes "$3" \
      --iters "$iters" --warmup "$warmup" >"$out" || { cat "$out" >&2; exit 1; }
  else
    timeout 300 env "${env_args[@]}" "$dseek" bench allreduce --ranks "$ranks" --bytes "$3" --iters "$iters" \
      --warmup "$warmup" >"$out" || { echo "variant $1 failed:" >&2; cat "$out" >&2; exit 1; }
  fi
  grep '^{' "$out" | sed "s/^{/{\"run\":$2,\"variant\":\"$name\",/" >>"$results"
}

echo "# dseek all-reduce variants, $ranks ranks, sizes $sizes, $runs runs, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "variants: ${variants[*]}"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
bytes=$("$py" -c '
import sys
m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
print(" ".join(str(int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)) for s in sys.argv[1].split(",")))' "$sizes")
for ((r = 0; r < runs; r++)); do
  for b in $bytes; do
    n=${#variants[@]}
    for ((k = 0; k < n; k++)); do run_variant "${variants[$(((k + r) % n))]}" "$r" "$b"; done
  done
  echo "run $((r + 1))/$runs done" >&2
done

"$py" - "$results" "${variants[@]%%:*}" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"allreduce"' in l]
names = sys.argv[2:]
t = {(r["variant"], r["bytes"], r["run"]): r["time_us_median"] for r in rows}
sizes = sorted({r["bytes"] for r in rows})
runs = sorted({r["run"] for r in rows})
print()
print("median over runs of the per-call median time, us; ratio = median over runs of time(%s) / time(variant) [min-max]" % names[0])
print()
print("| size | " + " | ".join(names) + " | " + " | ".join(f"ratio {n}" for n in names[1:]) + " |")
print("|---:|" + "---:|" * (2 * len(names) - 1))
for b in sizes:
    med = [statistics.median(t[(n, b, r)] for r in runs) for n in names]
    ratios = []
    for n in names[1:]:
        q = [t[(names[0], b, r)] / t[(n, b, r)] for r in runs]
        ratios.append(f"**{statistics.median(q):.2f}** [{min(q):.2f}-{max(q):.2f}]")
    label = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
    print(f"| {label} | " + " | ".join(f"{m:.0f}" for m in med) + " | " + " | ".join(ratios) + " |")
PY
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
