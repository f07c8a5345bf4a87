#!/usr/bin/env bash
# Gradient compression's convergence gap and bytes (dseek issue 5): the tests' tiny job
# (tests/integration/test_elastic.cpp's compression case: dim 64, 2 layers, context 64,
# batch 12, 200 steps, validation on 16 batches) on 2 local nodes, 1 thread each, once
# uncompressed and once per compression setting, for several seeds; prints per seed the
# validation loss gap to the uncompressed run and the bytes the data plane sent over the
# whole run / the float32 gradient bytes. The peer here is dseek itself, uncompressed.
# Usage: bench/compression_gap.sh [SEEDS...]   (default 1337 1 2 3 4; ~10 s a run)
#   EXTRA="--set comm.variance_refresh_steps=0" compares another compressed setting.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1337 1 2 3 4)
work=$(mktemp -d /tmp/dseek-compression-gap.XXXXXX)
trap 'rm -rf "$work"' EXIT
build/bin/dseek data prepare --input /usr/lib/python3.11 --output "$work/text" --max-bytes 3000000 > /dev/null

# val_loss and sent/grad bytes of node 0 of a finished run.
summary() {
  "$py" - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/node-0/events.jsonl")]
done = [e for e in ev if e["event"] == "train_done"][0]
steps = [e for e in ev if e["event"] == "step"]
sent = sum(e.get("comm_bytes_sent", 0) for e in steps) / sum(e.get("grad_bytes", 0) for e in steps)
print(done["val_loss"], sent)
PY
}
run() {  # run DIR SEED ARGS...
  local dir=$1 seed=$2; shift 2
  build/bin/dseek launch --nodes 2 --run-dir "$dir" config/single.toml --set data.dir="\"$work/text\"" \
    --set model.dim=64 --set model.layers=2 --set model.heads=4 --set model.context=64 \
    --set train.batch_size=12 --set train.steps=200 --set train.warmup_steps=5 \
    --set train.eval_every=0 --set train.eval_batches=16 --set train.threads=1 \
    --set train.seed="$seed" --set metrics.progress='"off"' "$@" > "$dir.log" 2>&1
  summary "$dir"
}

machine_line
echo "compressed: comm.compression=topk+int8 comm.topk_fraction=0.05 ${EXTRA:-}"
gaps=()
for seed in "${seeds[@]}"; do
  read -r plain_val _ < <(run "$work/plain-$seed" "$seed" --set comm.compression='"none"')
  # shellcheck disable=SC2086
  read -r packed_val sent < <(run "$work/packed-$seed" "$seed" --set comm.compression='"topk+int8"' \
                                --set comm.topk_fraction=0.05 ${EXTRA:-})
  gap=$("$py" -c "print(100 * ($packed_val - $plain_val) / $plain_val)")
  gaps+=("$gap")
  printf 'seed %-5s val_loss %.4f uncompressed, %.4f compressed: gap %+.2f%%, bytes sent %.2f%%\n' \
    "$seed" "$plain_val" "$packed_val" "$gap" "$("$py" -c "print(100 * $sent)")"
done
echo "mean gap: $("$py" -c 'import sys, statistics; print(f"{statistics.mean(map(float, sys.argv[1:])):+.2f}%")' "${gaps[@]}"), median $(median "${gaps[@]}")%"
