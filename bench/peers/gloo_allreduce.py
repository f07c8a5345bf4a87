#!/usr/bin/python3
"""Gloo peer of `dseek bench allreduce`: torch.distributed all_reduce (gloo backend) fp32
sum bandwidth per size between N local processes, one JSON line per size from rank 0,
the same fields and timing rule as dseek's and the OpenMPI peer's: in place, `warmup`
untimed calls, then `iters` calls each after a barrier; a call's time is the slowest
rank's (one MAX all_reduce of the times at the end); the median.
  algbw = bytes / time,  busbw = algbw * 2(N-1)/N   (nccl-tests)

  /usr/bin/python3 bench/peers/gloo_allreduce.py --ranks N --bytes 4096,1048576 [--iters K] [--warmup W]

Rendezvous through a FileStore in a fresh temp dir (no port to race for). Each process
runs torch with one thread: the collective is the work, and the ranks share the cores.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, args, init_file):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=args.ranks)
    for size in args.bytes:
        count = max(1, size // 4)
        buf = torch.ones(count, dtype=torch.float32)  # written: pages mapped before timing
        for _ in range(args.warmup):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        times = torch.zeros(args.iters, dtype=torch.float64)
        for i in range(args.iters):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            times[i] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        if rank == 0:
            t = statistics.median(times.tolist())
            algbw = count * 4 / t / 1e9
            print(json.dumps({"bench": "allreduce", "impl": "gloo", "ranks": args.ranks, "bytes": count * 4,
                              "dtype": "f32", "iters": args.iters, "time_us_median": t * 1e6,
                              "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (args.ranks - 1) / args.ranks}),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--bytes", type=lambda s: [int(x) for x in s.split(",") if x], required=True)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gloo-bench-") as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    sys.exit(main())
