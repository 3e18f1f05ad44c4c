"""The monitor's overhead on a fast (~1 ms) PyTorch training step loop.

Trains a small MLP on the CPU (one intra-op thread) with steps of about 1 ms,
alternating runs without and with a TrainingMonitor (in-process: its engine
ticks every ``--interval`` in a background thread, draining the buffer through
the OTel instruments and the diagnostic pipeline). The monitor records a data
wait (wrap_dataloader), ``step(tokens, samples)`` and ``record(loss)`` every
step. On a shared machine the noise between runs is a few percent; the
median of per-pair ratios is the figure to read. Prints the median step time of each, over ``--runs`` alternating pairs,
and the overhead as a percentage of the bare step.

    python bench/monitor_overhead.py [--runs 31] [--steps 300] [--width 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from trainpulse_otel import TrainingMonitor

BATCH = 32


def make_model(width: int) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width))
    batches = [(torch.randn(BATCH, width), torch.randn(BATCH, width)) for _ in range(16)]
    return model, batches


def train_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 1e-3 * p.grad
            p.grad = None
    return loss.detach()


def bare(model: torch.nn.Module, batches: list, steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        train_step(model, x, y)
    return (time.perf_counter() - start) / steps


def monitored(model: torch.nn.Module, batches: list, steps: int, monitor: TrainingMonitor) -> float:
    loader = monitor.wrap_dataloader(batches[i % len(batches)] for i in range(steps))
    start = time.perf_counter()
    for x, y in loader:
        with monitor.step(tokens=BATCH, samples=BATCH):
            loss = train_step(model, x, y)
        monitor.record(loss=loss.item())  # a float: on the CPU, holding a tensor a step costs more than the monitor
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=256, help="MLP width; sets the step time")
    parser.add_argument("--interval", type=float, default=1.0, help="the monitor's collection interval (s)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, batches = make_model(args.width)
    monitor = TrainingMonitor(
        model_name="overhead", model=model, interval=args.interval, hardware="none", peak_flops=1e11
    )
    bare(model, batches, args.steps // 5)  # warm up
    monitored(model, batches, args.steps // 5, monitor)
    without, with_monitor = [], []
    try:
        for _ in range(args.runs):
            without.append(bare(model, batches, args.steps))
            with_monitor.append(monitored(model, batches, args.steps, monitor))
    finally:
        monitor.close()
    base, mon = statistics.median(without), statistics.median(with_monitor)
    pairs = statistics.median((m - b) / b for b, m in zip(without, with_monitor, strict=True))
    print(f"fast-step loop overhead: median of {args.runs} alternating runs of {args.steps} steps")
    print(f"{'':16} {'ms/step':>8}")
    print(f"{'without monitor':16} {base * 1000:8.3f}")
    print(f"{'with monitor':16} {mon * 1000:8.3f}")
    print(
        f"overhead: {100 * (mon - base) / base:+.2f}% of the bare step (median of per-pair ratios {100 * pairs:+.2f}%)"
    )
    print(f"monitor: {monitor.stats}")


if __name__ == "__main__":
    main()
