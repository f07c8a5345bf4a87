#!/usr/bin/env bash
# Training throughput of one dseek build against another, layout by layout, through
# `dseek launch` as a user runs it: for a refactoring of the trainers (issue 19: "no
# loss of speed"), the build before it (OLD) and after it (NEW) on the same machine,
# interleaved run by run so that machine noise hits both.
#
#   OLD_BIN=/path/old/build/bin/dseek NEW_BIN=build/bin/dseek \
#     bench/layouts_old_vs_new.sh [--layouts "dp2 pp2 tp2"] [--rounds 3] [--steps 12]
#                                 [--config FILE] [--data DIR] [--set KEY=VALUE ...]
#
# Layouts: one (a single node, no data plane), dp2 (2 data-parallel nodes), pp2 (2 pipeline stages, 1F1B, micro-batches of
# 4), tp2 (a tensor-parallel group of 2), dtp4 (2 replicas of a 2-rank tensor group),
# dpp4 (2 replicas of a 2-stage pipeline). Every node trains with train.threads=1 on the
# config (default bench/configs/gpt-d384.toml, batch 8) and the prepared Python sources.
# tokens/s is the median over node 0's step events after the first two (connections,
# page faults); the table gives, per layout, the median over the rounds for each build
# and the ratio NEW/OLD (> 1: the new build is faster). --set adds a setting to every
# run of both builds (e.g. train.replica_check_every=0 to compare without a check that
# only the new build runs in some layout).
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh

layouts="dp2 pp2 tp2" rounds=3 steps=12 config=bench/configs/gpt-d384.toml data=data/python-stdlib
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layouts) layouts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
old=${OLD_BIN:?set OLD_BIN to the old build\'s dseek}
new=${NEW_BIN:-build/bin/dseek}
for bin in "$old" "$new"; do
  [[ -x $bin && -x $(dirname "$bin")/dseek-node ]] || { echo "no dseek and dseek-node at $bin" >&2; exit 1; }
done
if [[ ! -f $data/index.capnp ]]; then
  echo "preparing $data from /usr/lib/python3.11" >&2
  "$new" data prepare --input /usr/lib/python3.11 --output "$data" >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# `dseek launch` arguments of a layout.
layout_args() {
  case "$1" in
    one) echo "--nodes 1" ;;
    dp2) echo "--nodes 2" ;;
    pp2) echo "--nodes 2 --set parallel.pipeline=2 --set train.micro_batch_size=4" ;;
    tp2) echo "--nodes 2 --set parallel.tensor=2" ;;
    dtp4) echo "--nodes 4 --set parallel.tensor=2 --set parallel.data=2" ;;
    dpp4) echo "--nodes 4 --set parallel.pipeline=2 --set parallel.data=2 --set train.micro_batch_size=2" ;;
    *) echo "unknown layout $1" >&2; exit 2 ;;
  esac
}

# One run: prints the median tokens/s of node 0's steps after the first two.
run() {
  local bin=$1 layout=$2 dir
  dir=$(mktemp -d -p "$work")
  # shellcheck disable=SC2046
  timeout 600 "$bin" launch $(layout_args "$layout") "$config" --run-dir "$dir" \
    --set data.dir="\"$data\"" --set train.steps="$steps" --set train.threads=1 \
    --set train.eval_every=0 --set checkpoint.every_steps=0 "${extra[@]}" > "$dir/out.txt" 2>&1 \
    || { echo "run failed: $bin $layout (see below)" >&2; tail -20 "$dir/out.txt" >&2; exit 1; }
  "$py" - "$dir/node-0/events.jsonl" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l.replace(" ", "")]
print(statistics.median(s["tokens_per_s"] for s in steps[2:]))
PY
}

machine_line ", flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); old: $old; new: $new; config: $config; steps: $steps; rounds: $rounds; extra: ${extra[*]:-none}"
declare -A old_runs new_runs
for ((round = 1; round <= rounds; round++)); do
  for layout in $layouts; do
    # Each build goes first in every other round (a run can warm or load the machine for
    # the next one).
    if ((round % 2)); then o=$(run "$old" "$layout"); n=$(run "$new" "$layout")
    else n=$(run "$new" "$layout"); o=$(run "$old" "$layout"); fi
    old_runs[$layout]+="$o "; new_runs[$layout]+="$n "
    echo "round $round $layout: old $o new $n tokens/s"
  done
done
printf '\n| layout | old tokens/s | new tokens/s | new/old |\n|---|---:|---:|---:|\n'
for layout in $layouts; do
  # shellcheck disable=SC2086
  o=$(median ${old_runs[$layout]}); n=$(median ${new_runs[$layout]})
  printf '| %s | %.0f | %.0f | %.3f |\n' "$layout" "$o" "$n" "$("$py" -c "print($n / $o)")"
done
