#!/usr/bin/env bash
# What the SDC audit (train.sdc_audit_every, runtime/train/sdc_audit.hpp) costs a
# training run: a 3-node data-parallel `dseek launch` job (each node one compute thread)
# without the audit and with one every K steps, interleaved round by round so machine
# noise hits both. An audit recomputes one replica's slice of its step, so its cost falls
# with the cadence: the table gives the measured cost at K and what it comes to at the
# default cadence (100 steps) and at any cadence N (cost at K x K / N).
#
#   bench/sdc_audit_cost.sh [--every 10] [--steps 30] [--rounds 3] [--config FILE]
#                           [--data DIR] (default data/python-stdlib, prepared on first use)
#
# Two measures: wall, the summed step_ms of node 0's steps after the first two, (audited
# - plain) / plain; in-run, the audited run's own figure: the median sdc_audit_ms of its
# audits over the median step_ms of the plain run's steps, divided by K. Target (issue
# 28): under 2% at the default cadence.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh

every=10 steps=30 rounds=3 config=bench/configs/gpt-d384.toml data=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --every) every=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
[[ -x $dseek ]] || { echo "no dseek at $dseek (set DSEEK_BIN)" >&2; exit 1; }
data=$(prepared_data "$data" -)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run with audits every $2 steps (0: none): prints the summed step_ms after the
# first two steps, the median step_ms and the median sdc_audit_ms (0 without audits).
run() {
  local round=$1 cadence=$2 dir
  dir="$work/$round-$cadence"
  mkdir -p "$dir"
  timeout 900 "$dseek" launch --nodes 3 "$config" --run-dir "$dir" \
    --set data.dir="\"$data\"" --set train.steps="$steps" --set train.batch_size=12 \
    --set train.threads=1 --set train.eval_every=0 --set checkpoint.every_steps=0 \
    --set train.sdc_audit_every="$cadence" > "$dir/out.txt" 2>&1 \
    || { echo "run failed: every $cadence (see below)" >&2; tail -20 "$dir/out.txt" >&2; exit 1; }
  "$py" - "$dir/node-0/events.jsonl" <<'PY'
import json, statistics, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "step"]
audits = [s["sdc_audit_ms"] for s in steps if "sdc_audit_ms" in s]
later = steps[2:]
print(sum(s["step_ms"] for s in later), statistics.median(s["step_ms"] for s in later),
      statistics.median(audits) if audits else 0)
PY
}

machine_line ", flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); config: $config (batch 12 over 3 nodes); steps: $steps; audit every $every; rounds: $rounds"
plain_sums="" audited_sums="" plain_steps="" audit_ms=""
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2)); then p=$(run "$round" 0); a=$(run "$round" "$every")
  else a=$(run "$round" "$every"); p=$(run "$round" 0); fi
  read -r p_sum p_step _ <<< "$p"
  read -r a_sum _ a_audit <<< "$a"
  plain_sums+="$p_sum " audited_sums+="$a_sum " plain_steps+="$p_step " audit_ms+="$a_audit "
  echo "round $round: plain ${p_sum} ms, audited every $every ${a_sum} ms (median audit ${a_audit} ms, plain step ${p_step} ms)"
done
# shellcheck disable=SC2086
"$py" - "$every" "$(median $plain_sums)" "$(median $audited_sums)" "$(median $plain_steps)" "$(median $audit_ms)" <<'PY'
import sys
every, plain, audited, step, audit = map(float, sys.argv[1:])
wall = (audited - plain) / plain
in_run = audit / step / every
print(f"\n| measure | cost at every {every:.0f} | at every 100 (default) |\n|---|---:|---:|")
print(f"| wall (summed step_ms) | {wall:.2%} | {wall * every / 100:.2%} |")
print(f"| in-run (audit ms / step ms / K) | {in_run:.2%} | {in_run * every / 100:.2%} |")
print(f"one audit: {audit:.0f} ms against a {step:.0f} ms step ({audit / step:.2f} steps)")
PY
