#!/usr/bin/env bash
# Data-parallel training throughput: `dseek launch --nodes N` against PyTorch
# DistributedDataParallel over gloo (bench/peers/pytorch_ddp_train.py: the same GPT,
# AdamW, clipping, fp32 eager), N processes x 1 thread on this machine.
#
#   bench/dp_vs_ddp.sh [--config FILE] [--nodes 2] [--rounds 3] [--steps 6] [--warmup 1]
#                      [--data DIR] [--run-timeout 300] [--peer-scaling] [--keep]
#
# Each round runs dseek on N nodes, dseek on 1 node, then PyTorch DDP on N ranks,
# interleaved so machine noise hits all of them, and prints each run; then a table of
# medians, the ratio dseek/pytorch and dseek's scaling efficiency
# (tokens/s at N nodes) / (N x tokens/s at 1 node). Both sides train the config's
# batch_size as the GLOBAL batch (batch_size / N sequences per process) for
# warmup + steps steps; tokens/s is the median over the steps after warm-up of the
# global tokens of a step / its time (dseek: node 0's "step" events in
# RUN_DIR/node-0/events.jsonl; PyTorch: rank 0). --peer-scaling also runs the
# single-process PyTorch peer (1 thread) per round for PyTorch's own efficiency.
# dseek: $DSEEK_BIN (default build/bin/dseek; dseek-node next to it), with
# train.threads=1, trained on --data (default: the config's data.dir, else
# data/python-stdlib, prepared like scripts/run-main.sh if missing). PyTorch:
# /usr/bin/python3, 1 thread per rank (OMP/OPENBLAS_NUM_THREADS=1,
# OMP_WAIT_POLICY=PASSIVE). OPENBLAS_CORETYPE as bench/lib/common.sh sets it, for both sides.
# Exits non-zero if a run fails or takes longer than --run-timeout seconds; --keep
# keeps the run directories (dseek's events and logs).
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml nodes=2 rounds=3 steps=6 warmup=1 data="" run_timeout=300 peer_scaling=0 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --peer-scaling) peer_scaling=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
py=/usr/bin/python3
[[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
[[ -x $(dirname "$dseek")/dseek-node || -n ${DSEEK_NODE_BINARY:-} ]] \
  || { echo "dseek-node not found next to $dseek" >&2; exit 1; }
t_begin=$SECONDS

source bench/lib/common.sh
read -r dim layers heads context vocab batch cfg_data < <(model_shape "$config")
(( batch % nodes == 0 )) || { echo "batch_size $batch is not divisible by --nodes $nodes" >&2; exit 2; }
data=$(prepared_data "$data" "$cfg_data")

work=$(mktemp -d "${TMPDIR:-/tmp}/dp_vs_ddp.XXXXXX")
if (( keep )); then echo "run directories kept under $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

div() { "$py" -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$@"; }

# Node 0's step events after warm-up: "tokens_per_s step_ms comm_ms mode".
dseek_stats() {
  "$py" - "$1/node-0/events.jsonl" "$warmup" "$steps" <<'PY'
import json, statistics, sys
path, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ev = [json.loads(l) for l in open(path) if l.strip()]
started = next((e for e in ev if e["event"] == "run_started"), {})
st = [e for e in ev if e["event"] == "step" and e["step"] > warmup]
if len(st) < steps:
    sys.exit(f"{path}: {len(st)} step events after warm-up, expected {steps}")
dp = "data_parallel" in started or any(e.get("comm_ms", 0) > 0 for e in ev if e["event"] == "step")
med = lambda k: statistics.median(float(e.get(k, 0)) for e in st)
print(f'{med("tokens_per_s"):.1f} {med("step_ms"):.1f} {med("comm_ms"):.1f}',
      "data-parallel" if dp else "independent")
PY
}

# dseek_run NODES NAME: a `dseek launch` job; its log goes to $work/NAME.log.
dseek_run() {
  local n=$1 dir=$work/$2
  rm -rf "$dir"
  if ! "$dseek" launch --nodes "$n" --run-dir "$dir" --timeout "$run_timeout" "$config" \
         --set train.threads=1 --set train.steps=$((warmup + steps)) --set data.dir="$data" \
         --set train.eval_every=0 --set train.eval_batches=1 --set checkpoint.every_steps=0 \
         --set metrics.progress=plain --set metrics.log_every=1000 >"$dir.log" 2>&1; then
    echo "dseek launch --nodes $n failed; the end of its log ($dir.log):" >&2
    tail -20 "$dir.log" >&2
    return 1
  fi
  dseek_stats "$dir"
}

torch_env=(timeout "$run_timeout" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE)
shape=(--dim "$dim" --layers "$layers" --heads "$heads" --context "$context" --vocab "$vocab"
       --batch-size "$batch" --steps "$steps" --warmup "$warmup")
# tokens_per_s from the last JSON line of a run's stdout.

echo "# dseek data-parallel vs PyTorch DDP (gloo) training throughput, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line ", load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab;" \
     "global batch $batch ($((batch / nodes)) per process at $nodes); fp32"
echo "processes: $nodes x 1 thread per side (dseek train.threads=1; PyTorch set_num_threads(1), OMP/OPENBLAS_NUM_THREADS=1, OMP_WAIT_POLICY=PASSIVE)"
echo "steps: $warmup warm-up + $steps timed per run, tokens/s = median over timed steps; $rounds rounds of dseek x$nodes, dseek x1, PyTorch DDP x$nodes$( ((peer_scaling)) && echo ", PyTorch x1"), interleaved"
echo "dseek: $dseek launch, data $data; PyTorch: $("$py" -c 'import torch; print(torch.__version__)') DDP gloo on 127.0.0.1, random tokens"
blas_line
echo

dn=() d1=() pn=() p1=() eff=() peff=() steps_ms=() comms=() modes=()
for ((r = 1; r <= rounds; r++)); do
  s=$(dseek_run "$nodes" "round$r-n$nodes") || exit 1
  read -r tps_n step_ms comm_ms mode <<<"$s"
  dn+=("$tps_n") steps_ms+=("$step_ms") comms+=("$comm_ms") modes+=("$mode")
  s=$(dseek_run 1 "round$r-n1") || exit 1
  read -r tps_1 _ _ _ <<<"$s"
  d1+=("$tps_1")
  out=$("${torch_env[@]}" "$py" bench/peers/pytorch_ddp_train.py --nprocs "$nodes" --threads 1 "${shape[@]}") \
    || { echo "pytorch DDP failed (round $r)" >&2; exit 1; }
  pn+=("$(tps <<<"$out")")
  eff+=("$("$py" -c "print($tps_n / ($nodes * $tps_1))")")
  line="round $r: dseek x$nodes $tps_n tok/s (step $step_ms ms, comm $comm_ms ms, $mode), dseek x1 $tps_1 tok/s, pytorch DDP x$nodes ${pn[-1]} tok/s"
  if ((peer_scaling)); then
    out=$("${torch_env[@]}" "$py" bench/peers/pytorch_gpt_train.py --threads 1 "${shape[@]}") \
      || { echo "pytorch single failed (round $r)" >&2; exit 1; }
    p1+=("$(tps <<<"$out")")
    peff+=("$("$py" -c "print(${pn[-1]} / ($nodes * ${p1[-1]}))")")
    line+=", pytorch x1 ${p1[-1]} tok/s"
  fi
  printf '%s; dseek efficiency %.2f\n' "$line" "${eff[-1]}"
done

m_dn=$(median "${dn[@]}") m_d1=$(median "${d1[@]}") m_pn=$(median "${pn[@]}")
m_eff=$(median "${eff[@]}") m_step=$(median "${steps_ms[@]}") m_comm=$(median "${comms[@]}")
echo
echo "| side | processes x threads | tok/s (median) | vs PyTorch DDP |"
echo "|---|---:|---:|---:|"
printf '| dseek launch | %d x 1 | %.1f | **%.2f** |\n' "$nodes" "$m_dn" "$(div "$m_dn" "$m_pn")"
printf '| PyTorch DDP gloo | %d x 1 | %.1f | 1.00 |\n' "$nodes" "$m_pn"
printf '| dseek launch | 1 x 1 | %.1f | %.2f |\n' "$m_d1" "$(div "$m_d1" "$m_pn")"
if ((peer_scaling)); then
  m_p1=$(median "${p1[@]}")
  printf '| PyTorch (no DDP) | 1 x 1 | %.1f | %.2f |\n' "$m_p1" "$(div "$m_p1" "$m_pn")"
fi
echo
printf 'dseek/pytorch at %d processes: %.2f\n' "$nodes" "$(div "$m_dn" "$m_pn")"
printf 'dseek scaling efficiency at %d nodes: %.2f (median of rounds; from the medians: %.2f) = tok/s at %d / (%d x tok/s at 1)\n' \
  "$nodes" "$m_eff" "$("$py" -c "print($m_dn / ($nodes * $m_d1))")" "$nodes" "$nodes"
if ((peer_scaling)); then
  printf 'PyTorch DDP scaling efficiency at %d ranks: %.2f (median of rounds)\n' "$nodes" "$(median "${peff[@]}")"
fi
printf 'dseek x%d: median step %.1f ms, comm %.1f ms\n' "$nodes" "$m_step" "$m_comm"
if [[ " ${modes[*]} " == *" independent "* ]]; then
  echo "NOTE: dseek launch ran INDEPENDENT replicas in at least one round (no data_parallel in node 0's" \
       "run_started, comm_ms 0): each node trained the whole batch alone, so dseek's x$nodes tokens/s" \
       "is one replica's, not a data-parallel figure."
fi
echo "total $((SECONDS - t_begin)) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
