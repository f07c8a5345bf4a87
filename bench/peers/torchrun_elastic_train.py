#!/usr/bin/python3
"""torchrun peer of bench/hosts_recovery.sh: how PyTorch's elastic agent recovers.

A worker of `torchrun --nproc-per-node N --max-restarts K` (it reads RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR/PORT and TORCHELASTIC_RESTART_COUNT from torchrun): the GPT of
gpt_model.py under DistributedDataParallel (gloo, one thread), AdamW, random tokens,
a checkpoint (model and optimizer, written to a temporary file and renamed) by rank 0
after every step, so a restart loses no step. At its start every worker loads the
newest checkpoint, if there is one, and goes on from its step. Rank 0 appends one JSON
line per completed step to DIR/steps.jsonl: {"step", "ts" (Unix seconds), "restart"
(TORCHELASTIC_RESTART_COUNT)}. When a worker dies, torchrun stops every worker and starts
them all again (a new rendezvous round): the bench measures the time from the kill to
the first step of the restarted workers.

With --launch N it is the agent instead: torchrun's own launcher (torch.distributed's
elastic_launch, the function the torchrun command runs) with N workers of this script,
c10d rendezvous on --port, --max-restarts restarts, a 0.1 s monitor interval. (The
torchrun command of Debian 12's torch 1.13 fails at its start under Python 3.11: its
--redirects default parses to None; the launcher API takes the values directly.)
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="checkpoint and steps.jsonl")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=12, help="GLOBAL batch")
    ap.add_argument("--launch", type=int, default=0, help="run the agent with this many workers")
    ap.add_argument("--port", type=int, default=29400, help="--launch: the rendezvous port")
    ap.add_argument("--max-restarts", type=int, default=3)
    a = ap.parse_args()
    if a.launch:
        return launch(a)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gpt_model

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpt_model import GPT, make_optimizer

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(1337)
    model = GPT(a.vocab, a.context, a.dim, a.layers, a.heads)
    DDP._set_params_and_buffers_to_ignore_for_model(model, [n for n, _ in model.named_buffers()])
    ddp = DDP(model)
    opt = make_optimizer(ddp)
    checkpoint = os.path.join(a.dir, "checkpoint.pt")
    start = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
    gen = torch.Generator().manual_seed(1234 + rank)
    local = a.batch_size // world
    for step in range(start, a.steps):
        data = torch.randint(a.vocab, (local, a.context + 1), generator=gen)
        x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        opt.zero_grad(set_to_none=True)
        loss = ddp(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        if rank == 0:
            tmp = checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "step": step + 1}, tmp)
            os.replace(tmp, checkpoint)
            with open(os.path.join(a.dir, "steps.jsonl"), "a") as out:
                out.write(json.dumps({"step": step + 1, "ts": time.time(), "restart": restart,
                                      "loss": round(loss.item(), 4)}) + "\n")
        # The checkpoint of this step is on disk before any rank starts the next.
        dist.barrier()
    dist.destroy_process_group()


def launch(a):
    from torch.distributed.elastic.multiprocessing import Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=a.launch, run_id="hosts-recovery",
                          rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{a.port}",
                          max_restarts=a.max_restarts, monitor_interval=0.1,
                          redirects=Std.NONE, tee=Std.NONE)
    args = [os.path.abspath(__file__), "--dir", a.dir, "--steps", str(a.steps), "--dim", str(a.dim),
            "--layers", str(a.layers), "--heads", str(a.heads), "--context", str(a.context),
            "--vocab", str(a.vocab), "--batch-size", str(a.batch_size)]
    elastic_launch(config, entrypoint=sys.executable)(*args)


if __name__ == "__main__":
    main()
