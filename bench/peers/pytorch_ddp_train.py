#!/usr/bin/python3
"""PyTorch DDP peer of `dseek launch`: the same GPT, data-parallel over gloo.

Trains the GPT of gpt_model.py (the model of pytorch_gpt_train.py) wrapped in
torch.nn.parallel.DistributedDataParallel with the gloo backend, as --nprocs
processes on 127.0.0.1 (torch.multiprocessing spawn; MASTER_ADDR=127.0.0.1,
MASTER_PORT a free port unless --port). Each rank runs --threads compute threads
(default 1: torch.set_num_threads, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, which
Debian's OpenBLAS needs because set_num_threads does not reach it) with
OMP_WAIT_POLICY=PASSIVE, and trains --batch-size / --nprocs sequences of random
tokens per step, so the GLOBAL batch is --batch-size, as in dseek where
train.batch_size is the job's batch. AdamW (lr 1e-3, betas 0.9/0.95, weight decay
0.1 on 2-D weights), global grad-norm clipping at 1.0, fp32 eager. DDP runs with
its defaults (25 MiB buckets, all-reduce overlapped with backward); the only
buffers, the constant bool causal masks, are left out of its syncs (gloo cannot
broadcast bool tensors, and they never change).

Each step (zero_grad + forward + backward with its all-reduce + clip + optimizer
step) is timed on rank 0 with time.perf_counter; after --warmup untimed steps,
--steps steps are timed. Prints ONE JSON line (from rank 0), bench
"train-pytorch-ddp": tokens_per_s is the median over timed steps of
global_batch*context/step_time (dseek's definition for a step), tokens_per_s_total
the global tokens of all timed steps over their wall time.

Driven by bench/dp_vs_ddp.sh; run it with /usr/bin/python3 (the interpreter that
has Debian's python3-torch).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nprocs", type=int, default=2, help="DDP ranks (processes)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8, help="GLOBAL batch (sequences per step)")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--port", type=int, default=0, help="MASTER_PORT; 0 = a free port")
    a = ap.parse_args()
    if a.dim % a.heads or min(a.nprocs, a.threads, a.steps, a.dim, a.layers, a.heads,
                              a.context, a.vocab, a.batch_size) < 1:
        ap.error("need positive sizes, steps >= 1 and dim divisible by heads")
    if a.batch_size % a.nprocs:
        ap.error(f"--batch-size {a.batch_size} is not divisible by --nprocs {a.nprocs}")
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpt_model import GPT, make_optimizer

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.nprocs)
    torch.manual_seed(1337)  # same init everywhere; DDP also broadcasts rank 0's parameters
    model = GPT(a.vocab, a.context, a.dim, a.layers, a.heads)
    # The only buffers are the constant causal masks: bool tensors, which gloo cannot
    # broadcast ("Invalid scalar type"), so DDP leaves them out of its syncs.
    DDP._set_params_and_buffers_to_ignore_for_model(
        model, [n for n, _ in model.named_buffers()])
    ddp = DDP(model)
    opt = make_optimizer(ddp)
    gen = torch.Generator().manual_seed(1234 + rank)  # each rank its own samples
    local = a.batch_size // a.nprocs
    tokens = a.batch_size * a.context  # global tokens per step

    times, loss = [], float("nan")
    t_start = None
    for step in range(a.warmup + a.steps):
        data = torch.randint(a.vocab, (local, a.context + 1), generator=gen)
        x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        if step == a.warmup:
            dist.barrier()
            t_start = time.perf_counter()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        l = ddp(x, y)
        l.backward()  # DDP all-reduces (averages) the gradients here, bucket by bucket
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        loss = l.item()
        if step >= a.warmup:
            times.append(dt)
    dist.barrier()
    total = time.perf_counter() - t_start

    if rank == 0:
        print(json.dumps({
            "bench": "train-pytorch-ddp",
            "tokens_per_s": round(statistics.median(tokens / t for t in times), 1),
            "tokens_per_s_total": round(tokens * len(times) / total, 1),
            "step_ms_median": round(1e3 * statistics.median(times), 2),
            "step_ms": [round(1e3 * t, 2) for t in times],
            "nprocs": a.nprocs,
            "threads_per_rank": a.threads,
            "backend": dist.get_backend(),
            "dim": a.dim, "layers": a.layers, "heads": a.heads, "context": a.context,
            "vocab": a.vocab, "batch_size": a.batch_size, "batch_per_rank": local,
            "steps": a.steps, "warmup": a.warmup,
            "params": sum(p.numel() for p in model.parameters()),
            "final_loss_rank0": round(loss, 4),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
        }), flush=True)
    dist.destroy_process_group()


def main():
    a = parse_args()
    # Before torch (and OpenBLAS/OpenMP) load, in this process and the spawned ranks.
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(a.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo on the loopback, not the hostname's address
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port or free_port())
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gpt_model, in the ranks too

    import torch.multiprocessing as mp
    try:
        mp.spawn(worker, args=(a,), nprocs=a.nprocs, join=True)
    except Exception as e:  # a rank failed: its traceback is in the message
        print(f"pytorch_ddp_train: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
