#!/usr/bin/env bash
# The training-time reader on large vocabularies: the same text prepared three ways --
# the byte tokenizer (uint16 shards, vocabulary 256: what every data set was before the
# BPE tokenizers), gpt2 (uint16, 50257) and cl100k_base (uint32 shards, 100277) -- and
# trained side by side by dseek-node with one model (model.vocab = 100352, cl100k_base's
# 100277 padded to a multiple of 64, for all three, so a step computes the same). The
# step events' data_wait_ms is the time a step waits for its batches: with
# data.prefetch = 0 it is the reading itself (the shards' tokens into the batch), with the
# default prefetch (3) what a run really waits. Runs alternate the data sets (rotating the
# first one each round) so a load swing hits all three; the table shows each one's
# median data_wait_ms over the steps after the first two (and the median over rounds),
# the share of the step, and cl100k_base / bytes.
#
#   bench/reader_token_width.sh [--rounds 3] [--steps 12] [--input /usr/lib/python3.11]
#
# Prints markdown for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 steps=12 input=/usr/lib/python3.11
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
node=${DSEEK_NODE_BIN:-build/bin/dseek-node}
[ -x "$dseek" ] && [ -x "$node" ] || { echo "no $dseek or $node: build first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tokenizers=(bytes gpt2 cl100k_base)

for t in "${tokenizers[@]}"; do
  "$dseek" data prepare --input "$input" --output "$work/$t" --tokenizer "$t" --raw \
    --max-bytes 3000000 --no-progress > "$work/prepare.log" 2>&1 || { cat "$work/prepare.log" >&2; exit 1; }
done

# tokenizer prefetch -> "median data_wait_ms, median step_ms" of one run
run() {
  rm -rf "$work/run"
  "$node" --config config/single.toml --run-dir "$work/run" \
    --set "data.dir=\"$work/$1\"" --set data.prefetch="$2" --set model.vocab=100352 \
    --set model.dim=64 --set model.layers=2 --set model.heads=4 --set model.context=64 \
    --set train.batch_size=8 --set train.steps="$steps" --set train.warmup_steps=2 \
    --set train.eval_every=0 --set train.eval_batches=1 --set train.threads=1 \
    --set checkpoint.every_steps=0 --set metrics.progress=\"off\" > "$work/node.log" 2>&1 ||
    { cat "$work/node.log" >&2; exit 1; }
  python3 - "$work/run/node-0/events.jsonl" <<'PY'
import json, statistics, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "step"][2:]
print(statistics.median(e["data_wait_ms"] for e in steps), statistics.median(e["step_ms"] for e in steps))
PY
}

median() { python3 -c 'import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), $(date -u +'%Y-%m-%d %H:%M UTC')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${tokenizers[@]}"; do
  echo "data set $t: $("$dseek" data info "$work/$t" | head -1 | sed 's/^data set [^:]*: //'), $("$dseek" data info "$work/$t" | sed -n 's/^train: //p')"
done
run bytes 0 > /dev/null  # warm the page cache and the binaries
declare -A wait step
for prefetch in 0 3; do
  for ((r = 0; r < rounds; ++r)); do
    for ((k = 0; k < 3; ++k)); do
      t=${tokenizers[$(((r + k) % 3))]}
      read -r w s < <(run "$t" "$prefetch")
      wait[$t.$prefetch]+="$w " step[$t.$prefetch]+="$s "
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| data.prefetch | data set (shard tokens) | data_wait_ms per step (median of $rounds runs) | step_ms | share of the step | / bytes |"
echo "|--:|---|--:|--:|--:|--:|"
for prefetch in 0 3; do
  base=$(median ${wait[bytes.$prefetch]})
  for t in "${tokenizers[@]}"; do
    w=$(median ${wait[$t.$prefetch]}) s=$(median ${step[$t.$prefetch]})
    dtype=uint16; [ "$t" = cl100k_base ] && dtype=uint32
    python3 -c "
w, s, b = $w, $s, $base
print(f'| $prefetch | $t ($dtype) | {w:.3f} | {s:.0f} | {100 * w / s:.3f}% | ' + (f'{w / b:.2f}' if b > 0 else '-') + ' |')"
  done
done
