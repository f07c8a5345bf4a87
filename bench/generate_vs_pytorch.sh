#!/usr/bin/env bash
# Decode speed of `dseek generate` against PyTorch on the same weights and threads:
# greedy decoding with a KV cache, one token per step after the prompt's prefill
# (bench/peers/pytorch_gpt_generate.py: fp32 eager, torch.inference_mode).
#
#   bench/generate_vs_pytorch.sh [--config FILE] [--threads "1 2"] [--runs 3] [--tokens 200]
#
# Makes its own checkpoint first: `dseek data prepare` on Python's json package, then 2
# training steps of the config's model (the weights only need to be the same on both
# sides), exported with `dseek ckpt export --format safetensors` for PyTorch. Then, per
# thread count, `runs` rounds of dseek then PyTorch, interleaved, each decoding --tokens
# tokens after a 16-byte prompt (end-of-text ignored), and a table of the medians with
# the ratio dseek/pytorch. It also says whether the two greedy texts are the same token
# for token. Both sides run in the same environment (OPENBLAS_CORETYPE: bench/lib/common.sh);
# PyTorch also gets OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=<threads>
# (bench/train_vs_pytorch.sh says why). Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml threads="1 2" runs=3 tokens=200
py=/usr/bin/python3
source bench/lib/common.sh
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
node=${DSEEK_NODE_BIN:-build/bin/dseek-node}
[[ -x $dseek && -x $node ]] || { echo "dseek binaries not found: $dseek, $node" >&2; exit 1; }
read -r dim layers heads context vocab _ < <(model_shape "$config")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dseek" data prepare --input /usr/lib/python3.11/json --output "$work/data" >/dev/null
"$node" --config "$config" --run-dir "$work/run" --set data.dir="$work/data" \
  --set train.steps=2 --set train.warmup_steps=1 --set train.eval_every=0 \
  --set train.eval_batches=1 --set checkpoint.every_steps=2 --set metrics.progress=off \
  >"$work/train.log" 2>&1 || { cat "$work/train.log" >&2; exit 1; }
ckpt=$(ls -d "$work"/run/checkpoints/step-* | tail -1)
"$dseek" ckpt export "$ckpt" --format safetensors --output "$work/model.safetensors" >/dev/null
prompt='def load(path):'
prompt=${prompt}' '  # 16 bytes: 16 tokens of the byte tokenizer
ids=$("$py" -c 'import sys; print(" ".join(str(b) for b in sys.argv[1].encode()))' "$prompt")

echo "# dseek generate vs PyTorch, greedy decode with a KV cache, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab; fp32, batch 1"
echo "decode: ${#prompt}-token prompt, $tokens new tokens per run, $runs runs per side, interleaved"
blas_line
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)'), OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS=<threads>"
echo

declare -A med_d med_p
same=""
for n in $threads; do
  ds=() ps=()
  for ((r = 1; r <= runs; r++)); do
    "$dseek" generate --checkpoint "$ckpt" --prompt "$prompt" --temperature 0 \
      --max-tokens "$tokens" --ignore-end-of-text --threads "$n" \
      >"$work/dseek.out" 2>"$work/dseek.err" || { cat "$work/dseek.err" >&2; exit 1; }
    ds+=("$(sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p' "$work/dseek.err")")
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$n" "$py" bench/peers/pytorch_gpt_generate.py \
      --weights "$work/model.safetensors" --layers "$layers" --heads "$heads" \
      --prompt-ids "$ids" --max-tokens "$tokens" --threads "$n" >"$work/torch.out" \
      || { echo "pytorch failed (threads $n, run $r)" >&2; exit 1; }
    ps+=("$(tps <"$work/torch.out")")
    echo "threads $n run $r: dseek ${ds[-1]} tok/s, pytorch ${ps[-1]} tok/s"
  done
  med_d[$n]=$(median "${ds[@]}") med_p[$n]=$(median "${ps[@]}")
  # dseek's text is the tokens' bytes (byte tokenizer) and a newline.
  same=$("$py" - "$work/dseek.out" "$work/torch.out" <<'PY'
import json, sys
mine = list(open(sys.argv[1], "rb").read()[:-1])
theirs = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])["tokens"]
first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
if first is None and len(mine) == len(theirs):
    print(f"the same {len(mine)} tokens")
else:
    print(f"different: {len(mine)} vs {len(theirs)} tokens, first difference at {first}")
PY
)
  echo "threads $n: greedy texts of dseek and PyTorch: $same"
done

echo
echo "| threads | dseek decode tok/s | pytorch decode tok/s | dseek/pytorch |"
echo "|--------:|-------------------:|---------------------:|--------------:|"
for n in $threads; do
  ratio=$("$py" -c "print(f'{${med_d[$n]} / ${med_p[$n]}:.2f}')")
  printf "| %7s | %18.1f | %20.1f | %13s |\n" "$n" "${med_d[$n]}" "${med_p[$n]}" "$ratio"
done
