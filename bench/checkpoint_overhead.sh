#!/usr/bin/env bash
# What checkpointing costs a training run: the default config (config/single.toml)
# trained for `steps` steps without checkpoints, with a checkpoint every `every` steps
# written asynchronously (checkpoint.async = true: a host snapshot, then a background
# writer thread) and written synchronously (checkpoint.async = false: the step waits).
# Rounds are interleaved (none, async, sync, none, ...) so machine noise hits each mode.
# Also measures the disk's sequential write bandwidth with dd (fdatasync) in the same
# directory, which bounds what a synchronous write can cost.
#
#   bench/checkpoint_overhead.sh [--steps 60] [--every 10] [--rounds 3] [--dir DIR]
#
# Two measures of overhead:
#  - wall: train_done's elapsed_s (step loop, final evaluation, wait for the last
#    checkpoint), (median mode - median none) / median none. Honest but at the mercy of
#    anything else running on the machine.
#  - in-run: what the run itself paid, from its events, over its summed step_ms:
#    sync  = snapshot_ms + write_ms of every checkpoint (the steps wait for them);
#    async = snapshot_ms of every checkpoint + write_cpu_ms (the writer thread's CPU
#    time, an upper bound on what it takes from training) + the whole write_ms of the
#    last one (the run waits for it at its end). Robust to a noisy machine.
# Target (issue 6): async overhead < 3.5%. Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=60 every=10 rounds=3 dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
node=${DSEEK_NODE_BIN:-build/bin/dseek-node}
[[ -x $node ]] || { echo "dseek-node binary not found: $node (set DSEEK_NODE_BIN)" >&2; exit 1; }
work=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/dseek-ckpt-bench.XXXXXX")}
mkdir -p "$work"
trap '[[ -z $dir ]] && rm -rf "$work"' EXIT

echo "# checkpoint overhead: config/single.toml, $steps steps, checkpoint every $every, $rounds rounds, $(nproc) cores"
echo "# dir: $work"

# Disk: 256 MiB sequential write, flushed to the device before dd reports.
dd_line=$(dd if=/dev/zero of="$work/dd.bin" bs=1M count=256 conv=fdatasync 2>&1 | tail -1)
rm -f "$work/dd.bin"
echo "dd write (256 MiB, fdatasync): $dd_line"

run() {  # mode round -> prints elapsed_s mean_snapshot_ms mean_write_ms checkpoints bytes
  local mode=$1 round=$2 run_dir="$work/$1-$2"
  local extra=()
  case $mode in
    none) extra=(--set checkpoint.every_steps=0) ;;  # the default config checkpoints
    async) extra=(--set checkpoint.every_steps="$every" --set checkpoint.async=true) ;;
    sync) extra=(--set checkpoint.every_steps="$every" --set checkpoint.async=false) ;;
  esac
  "$node" --config config/single.toml --run-dir "$run_dir" --set train.steps="$steps" \
    --set metrics.progress='"off"' "${extra[@]}" >"$run_dir.log" 2>&1 ||
    { echo "run $mode/$round failed:" >&2; cat "$run_dir.log" >&2; exit 1; }
  /usr/bin/python3 - "$run_dir/node-0/events.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
done = [e for e in ev if e["event"] == "train_done"][0]
ck = [e for e in ev if e["event"] == "checkpoint_committed"]
skipped = sum(1 for e in ev if e["event"] == "checkpoint_skipped")
step_ms = sum(e["step_ms"] for e in ev if e["event"] == "step")
snap = sum(e["snapshot_ms"] for e in ck)
write = sum(e["write_ms"] for e in ck)
cpu = sum(e["write_cpu_ms"] for e in ck)
sync_cost = snap + write
async_cost = snap + cpu - (ck[-1]["write_cpu_ms"] - ck[-1]["write_ms"] if ck else 0)
n = max(len(ck), 1)
print(done["elapsed_s"], snap / n, write / n, len(ck), ck[-1]["bytes"] if ck else 0, skipped,
      cpu / n, 100 * sync_cost / step_ms, 100 * async_cost / step_ms, step_ms / 1000)
PY
  rm -rf "$run_dir/checkpoints"
}

declare -A results
for ((r = 1; r <= rounds; r++)); do
  for mode in none async sync; do
    line=$(run "$mode" "$r")
    results[$mode]+="$line"$'\n'
    echo "round $r $mode: elapsed_s snapshot_ms write_ms checkpoints bytes skipped write_cpu_ms sync% async% step_s = $line"
  done
done

/usr/bin/python3 - "${results[none]}" "${results[async]}" "${results[sync]}" "$dd_line" <<'PY'
import statistics, sys
def parse(text):
    return [list(map(float, l.split())) for l in text.strip().splitlines()]
modes = dict(zip(["none", "async", "sync"], map(parse, sys.argv[1:4])))
base = statistics.median(r[0] for r in modes["none"])
print()
print("| mode | median elapsed s | wall overhead % | in-run overhead % | checkpoints | MB each | snapshot ms | write ms | writer CPU ms | skipped |")
print("|---|---|---|---|---|---|---|---|---|---|")
inrun = {}
for name, rows in modes.items():
    t = statistics.median(r[0] for r in rows)
    over = (t - base) / base * 100
    ck = rows[0][3]
    mb = rows[0][4] / 1e6
    snap = statistics.median(r[1] for r in rows)
    write = statistics.median(r[2] for r in rows)
    skipped = statistics.median(r[5] for r in rows)
    cpu = statistics.median(r[6] for r in rows)
    inrun[name] = statistics.median(r[8 if name == "async" else 7] for r in rows) if name != "none" else 0.0
    print(f"| {name} | {t:.2f} | {over:+.1f} | {inrun[name]:.2f} | {ck:.0f} | {mb:.1f} | {snap:.1f} | {write:.1f} | {cpu:.1f} | {skipped:.0f} |")
print()
print(f"dd: {sys.argv[4]}")
async_over = (statistics.median(r[0] for r in modes["async"]) - base) / base * 100
print(f"async overhead: wall {async_over:+.2f}%, in-run {inrun['async']:.2f}% "
      f"(target < 3.5%: {'PASS' if inrun['async'] < 3.5 else 'FAIL'} in-run, "
      f"{'PASS' if async_over < 3.5 else 'FAIL'} wall)")
print(f"sync overhead: wall {(statistics.median(r[0] for r in modes['sync']) - base) / base * 100:+.2f}%, in-run {inrun['sync']:.2f}%")
PY
