#!/usr/bin/python3
"""PyTorch DDP peer of bench/hosts_compression.sh: one rank a host, gloo over TCP.

One rank of a DistributedDataParallel job (--rank of --world, rendezvous at --master
HOST:PORT, gloo on --ifname): the GPT of gpt_model.py, AdamW (lr 1e-3, betas 0.9/0.95,
weight decay 0.1 on 2-D weights), global grad-norm clipping at 1.0, one compute thread,
fp32. With --powersgd R the gradients go through PyTorch's PowerSGD communication hook
(torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook: rank-R approximation, error
feedback and warm start on, from the second step; the first is reduced whole, as
PowerSGD requires) instead of DDP's all-reduce.

Data: a data set of `dseek data prepare` (--data DIR: its train-*.tok and val-*.tok
shards, a 32-byte header then the token ids, 2 bytes each): each rank trains on
--batch-size / --world windows of --context + 1 tokens a step, drawn at random (seed
1234 + rank) from the train split; after the last step rank 0 evaluates the mean loss
of --eval-batches batches of --batch-size windows spread evenly over the validation split.
Rank 0 prints ONE JSON line: step_ms_median (the steps after --warmup), final_loss and
val_loss. The bytes on the wire are the bench's to count (on the hosts' links).
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

import numpy as np


def tokens_of(data_dir, split):
    shards = sorted(glob.glob(os.path.join(data_dir, f"{split}-*.tok")))
    if not shards:
        sys.exit(f"{data_dir}: no {split}-*.tok shard")
    parts = []
    for shard in shards:
        with open(shard, "rb") as f:
            header = f.read(32)
            if header[:8] != b"DSEEKTOK" or int.from_bytes(header[12:16], "little") != 2:
                sys.exit(f"{shard}: not a dseek token shard of 2-byte ids")
            count = int.from_bytes(header[16:24], "little")
            parts.append(np.frombuffer(f.read(2 * count), dtype=np.uint16))
    return np.concatenate(parts).astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="HOST:PORT of rank 0's rendezvous")
    ap.add_argument("--ifname", default="eth0", help="the interface gloo uses")
    ap.add_argument("--data", required=True)
    ap.add_argument("--powersgd", type=int, default=0, help="PowerSGD rank; 0 = plain DDP")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=12, help="GLOBAL batch")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=4, help="steps left out of the median")
    ap.add_argument("--eval-batches", type=int, default=4)
    a = ap.parse_args()
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    host, port = a.master.rsplit(":", 1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = host, port
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gpt_model

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpt_model import GPT, make_optimizer

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    torch.manual_seed(1337)
    model = GPT(a.vocab, a.context, a.dim, a.layers, a.heads)
    DDP._set_params_and_buffers_to_ignore_for_model(model, [n for n, _ in model.named_buffers()])
    ddp = DDP(model)
    if a.powersgd > 0:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd,
                                       start_powerSGD_iter=2, use_error_feedback=True,
                                       warm_start=True)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = make_optimizer(ddp)
    train = torch.from_numpy(tokens_of(a.data, "train"))
    gen = torch.Generator().manual_seed(1234 + a.rank)
    local = a.batch_size // a.world
    times, loss = [], float("nan")
    for step in range(a.steps):
        starts = torch.randint(len(train) - a.context - 1, (local,), generator=gen)
        data = torch.stack([train[s:s + a.context + 1] for s in starts.tolist()])
        x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        l = ddp(x, y)
        l.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
        loss = l.item()
    if a.rank == 0:
        val = torch.from_numpy(tokens_of(a.data, "val"))
        windows = a.eval_batches * a.batch_size
        stride = max(1, (len(val) - a.context - 1) // windows)
        model.eval()
        losses = []
        with torch.no_grad():
            for b in range(a.eval_batches):
                starts = [(b * a.batch_size + i) * stride for i in range(a.batch_size)]
                data = torch.stack([val[s:s + a.context + 1] for s in starts])
                losses.append(model(data[:, :-1].contiguous(), data[:, 1:].contiguous()).item())
        print(json.dumps({"bench": "train-pytorch-ddp-hosts", "powersgd": a.powersgd,
                          "step_ms_median": round(1e3 * statistics.median(times), 2),
                          "final_loss": round(loss, 4),
                          "val_loss": round(statistics.mean(losses), 4),
                          "torch": torch.__version__}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
