"""What hang forensics cost: the DDP communication hook per iteration, and one stack capture.

hook     one-process gloo DDP of eight 256x256 layers in ``--buckets``-sized buckets (8 by default),
         forward + backward per iteration: DDP's built-in C++ all-reduce (``none``), torch's own Python
         ``allreduce_hook`` (``torch``) and TrainPulse's marking hook (``trainpulse``), interleaved in
         ``--rounds`` rounds of ``--iters`` iterations; the fastest round and the median per variant
         (the machine is shared: the fastest is the least disturbed). Also the marker's own
         bookkeeping per bucket (``launched`` + ``completed``), alone.
stack    ``thread_stack`` of a thread blocked 20, 60 and 200 calls deep (64 frames kept), the median of
         5 x 1,000 captures, and the size of a heartbeat carrying that stack as JSON.

    python bench/hang_forensics.py [--rounds 15] [--iters 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from trainpulse_otel.integrations.monitor.commhook import AllReduceMarker
from trainpulse_otel.integrations.monitor.recorder import StepRecorder
from trainpulse_otel.integrations.monitor.stack import thread_stack
from trainpulse_otel.samples import RankSample, to_dict

WIDTH, LAYERS = 256, 8


def ddp(kind: str) -> tuple[torch.nn.Module, AllReduceMarker | None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)))
    wrapped = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.25)
    marker = None
    if kind == "torch":
        wrapped.register_comm_hook(wrapped.process_group, allreduce_hook)
    elif kind == "trainpulse":
        marker = AllReduceMarker(StepRecorder(), wrapped.process_group)
        wrapped.register_comm_hook(wrapped.process_group, marker.hook)
    return wrapped, marker


def bench_hook(rounds: int, iters: int) -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    x = torch.randn(8, WIDTH)
    models = {kind: ddp(kind) for kind in ("none", "torch", "trainpulse")}
    times: dict[str, list[float]] = {kind: [] for kind in models}
    for _ in range(rounds):
        for kind, (model, _) in models.items():
            for _ in range(20):
                model(x).sum().backward()
            start = time.perf_counter()
            for _ in range(iters):
                model(x).sum().backward()
            times[kind].append((time.perf_counter() - start) / iters * 1e6)
    marker = models["trainpulse"][1]
    buckets = marker.buckets / (rounds * (iters + 20)) if marker is not None else 0
    print(f"hook: {buckets:.0f} buckets a backward pass")
    for kind, runs in times.items():
        print(f"  {kind:10s} fastest {min(runs):7.0f} us   median {statistics.median(runs):7.0f} us an iteration")
    dist.destroy_process_group()
    bare = AllReduceMarker(StepRecorder(), None)
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(100_000):
            bare.launched()
            bare.completed()
        runs.append((time.perf_counter() - start) / 100_000 * 1e6)
    print(f"  marker bookkeeping alone: {statistics.median(runs):.2f} us a bucket (median of 7 x 100,000)")


def _deep(n: int, release: threading.Event, ready: threading.Event) -> None:
    if n:
        _deep(n - 1, release, ready)
        return
    ready.set()
    release.wait()


def bench_stack() -> None:
    print("stack:")
    for depth in (20, 60, 200):
        release, ready = threading.Event(), threading.Event()
        thread = threading.Thread(target=_deep, args=(depth, release, ready), daemon=True)
        thread.start()
        ready.wait()
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(1000):
                frames = thread_stack(thread.ident)
            runs.append((time.perf_counter() - start) / 1000 * 1e6)
        release.set()
        size = len(json.dumps(to_dict(RankSample(rank=0, phase="compute", stack=frames))))
        print(
            f"  {depth:3d} calls deep: {len(frames)} frames, {statistics.median(runs):5.1f} us a capture, "
            f"heartbeat {size} bytes of JSON (paths as long as this file's)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args()
    torch.set_num_threads(1)
    bench_hook(args.rounds, args.iters)
    bench_stack()


if __name__ == "__main__":
    main()
