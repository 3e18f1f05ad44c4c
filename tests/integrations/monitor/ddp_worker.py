"""One rank of an N-process gloo job with torch's own ``DistributedDataParallel``, instrumented only with
``TrainingMonitor(model=ddp)`` and ``monitor.step()``: no ``phase()``, no ``sync_point``.

    python ddp_worker.py RANK WORLD STORE_FILE OUT_JSON --master-port P [--seconds S] [--interval S]
                         [--hang-rank R --hang-after S --hang-s S] [--heartbeat-s 1] [--step-ms 20] [--no-hook]

Each step is a forward pass, ``--step-ms`` of waiting (the time a GPU rank's host thread waits on its
device; it keeps the CPU free for the other ranks) and ``loss.backward()``, in which DDP all-reduces the
gradients. ``--hang-rank`` really blocks: at the first step after rank 0 has run ``--hang-after``
seconds it sleeps ``--hang-s`` seconds before its backward pass (the line marked ``HANG``), while the
other ranks wait inside theirs, in DDP's all-reduce. After each step the ranks agree on rank 0's stop
and hang flags with a small all-reduce of their own (outside the step). Rank 0 writes OUT_JSON: the
timeline of its in-process diagnosis (:class:`~tests.integrations.monitor.gloo_worker.Timeline`),
every distinct ``rank_hang`` summary with its remediation and evidence, when the hang began and
which line of this file it blocks at. ``--no-hook`` leaves DDP's all-reduce unmarked
(``mark_all_reduce=False``): every rank then says ``compute``, and only the stacks tell them apart.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

from tests.integrations.monitor.gloo_worker import Timeline
from trainpulse_otel import TrainingMonitor

BATCH, WIDTH = 16, 64
LR = 0.01


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("rank", "world"):
        p.add_argument(name, type=int)
    p.add_argument("store")
    p.add_argument("out")
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--heartbeat-s", type=float, default=1.0)
    p.add_argument("--step-ms", type=float, default=20.0)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-after", type=float, default=float("inf"))
    p.add_argument("--hang-s", type=float, default=30.0)
    p.add_argument("--no-hook", action="store_true", help="TrainingMonitor(mark_all_reduce=False): stacks alone")
    return p.parse_args()


class HangTimeline(Timeline):
    """The timeline, and each distinct ``rank_hang`` cause (summary, remediation, evidence) when first seen."""

    def __init__(self, monitor: TrainingMonitor, start: float) -> None:
        self.hang_causes: list[dict] = []
        super().__init__(monitor, start)

    def poll(self, now: float) -> None:
        super().poll(now)
        for cause in (self.monitor.diagnosis() or {}).get("root_causes", []):
            if cause["cause"] == "rank_hang" and all(c["summary"] != cause["summary"] for c in self.hang_causes):
                self.hang_causes.append({"t": round(now - self.start, 2), **cause})


def main() -> None:
    args = parse()
    rank, world = args.rank, args.world
    os.environ.update(LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.master_port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    monitor = TrainingMonitor(
        model=ddp,
        model_name="ddp-mlp",
        interval=args.interval,
        hardware="none",
        heartbeat_s=args.heartbeat_s,
        mark_all_reduce=not args.no_hook,
    )
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)
    start = time.time()
    timeline = HangTimeline(monitor, start) if rank == 0 else None
    hang_from: int | None = None
    hang_at: float | None = None
    step = 0
    while True:
        if step == hang_from:
            hang_at = time.time() - start
        with monitor.step(tokens=BATCH, samples=BATCH):
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            time.sleep(args.step_ms / 1000.0)
            if rank == args.hang_rank and step == hang_from:
                time.sleep(args.hang_s)  # HANG: blocked before its backward pass; the others wait in DDP's all-reduce
            loss.backward()
            with torch.no_grad():
                for p in ddp.parameters():
                    p -= LR * p.grad
                    p.grad = None
        step += 1
        flags = torch.zeros(2)
        if rank == 0:
            elapsed = time.time() - start
            flags[0], flags[1] = float(elapsed >= args.seconds), float(elapsed >= args.hang_after)
        dist.all_reduce(flags)
        if flags[1] > 0 and hang_from is None:
            hang_from = step
        if timeline is not None:
            timeline.step = step
        if flags[0] > 0:
            break
    if timeline is not None:
        timeline.stop()
        monitor.flush()
        result = {
            "world": world,
            "steps": step,
            "seconds": round(time.time() - start, 1),
            "hang_rank": args.hang_rank,
            "hang_from_step": hang_from,
            "hang_from_s": None if hang_at is None else round(hang_at, 2),
            "hang_s": args.hang_s,
            "timeline": timeline.events,
            "hang_causes": timeline.hang_causes,
            "diagnosis": monitor.diagnosis(),
            "stats": monitor.stats,
            "all_reduce_hooked": monitor._all_reduce is not None,
        }
    monitor.close()
    dist.destroy_process_group()
    if timeline is not None:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
