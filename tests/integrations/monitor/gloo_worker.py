"""One rank of a 2-process gloo job on CPU, run by test_distributed.py (not collected by pytest).

    python gloo_worker.py RANK WORLD STORE_FILE OUT_JSON SLOW_RANK

Trains a tiny MLP with a hand-written DDP step: forward and backward, a timed
barrier (``sync_point``), then a timed gradient all-reduce. ``SLOW_RANK``
sleeps an extra 20 ms of "compute" per step. Rank 0 writes its monitor's last
report and diagnosis to OUT_JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from trainpulse_otel import TrainingMonitor
from trainpulse_otel.integrations.torch import sync_point
from trainpulse_otel.samples import to_dict

STEPS, GATHER_EVERY, SLOW_S, BATCH = 40, 2, 0.02, 16


def main() -> None:
    rank, world, store, out, slow_rank = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    rank, world = int(rank), int(world)
    os.environ["LOCAL_RANK"] = str(rank)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    monitor = TrainingMonitor(
        model_name="gloo-mlp",
        interval=0.05,
        hardware="none",
        gather_every=GATHER_EVERY,
        flops_per_token=6 * sum(p.numel() for p in model.parameters()),
    )
    x, y = torch.randn(BATCH, 32), torch.randn(BATCH, 32)
    for _ in range(STEPS):
        with monitor.step(tokens=BATCH, samples=BATCH):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if rank == slow_rank:
                time.sleep(SLOW_S)  # a deliberately slow rank
            sync_point(monitor)
            with monitor.phase("all_reduce"):
                for p in model.parameters():
                    dist.all_reduce(p.grad)
            with torch.no_grad():  # plain SGD: torch.optim would import torch._dynamo, seconds on 2 cores
                for p in model.parameters():
                    p -= 0.01 * p.grad / world
                    p.grad = None
    if rank == 0:
        monitor.flush()
        frame = monitor._destination.engine.frame
        result = {"training": to_dict(frame.training), "diagnosis": monitor.diagnosis(), "stats": monitor.stats}
    monitor.close()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
