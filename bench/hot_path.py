"""What recording one training step costs the training thread.

Prints, side by side, the median cost per step of:
  floor     appending a dict of 25 fields to a list: the least any per-step recorder can do
  monitor   TrainingMonitor as a loop uses it: the wait for the batch (wrap_dataloader),
            ``step(tokens, samples, seq_lens)`` with an all-reduce and a sync phase inside,
            ``record(loss, grad_norm, learning_rate)``; the report built from this carries the
            number of fields printed below (about 25)
  monitor+  the same plus ``record()`` of 16 more fields
  otel      25 synchronous OTel instrument calls (10 histograms, 15 gauges, two attributes each):
            what reporting those fields through the SDK on every step would cost
and, separately, the drain: the background thread's cost per step of turning the buffer into a
report (paid once per interval, off the training thread, but under the same GIL).
Each figure is the median over ``--runs`` runs of the mean over ``--steps`` steps, all measured in
this process; ratios are against ``monitor``.

    python bench/hot_path.py [--runs 15] [--steps 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from trainpulse_otel import TrainingMonitor
from trainpulse_otel.samples import to_dict

SEQ_LENS = [512, 480, 512, 377, 512, 500, 512, 256]
JOB_FIELDS = {"precision": "bf16", "global_batch_size": 64, "micro_batch_size": 8, "world_size": 8}
EXTRA_FIELDS = {
    "global_batch_size": 64,
    "micro_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "world_size": 8,
    "data_parallel_size": 8,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "pipeline_bubble_ratio": 0.0,
    "mfu": 0.41,
    "tflops": 405.0,
    "checkpoint_ms": 0.0,
    "tokenizer_wait_ms": 0.1,
    "loss": 2.31,
    "grad_norm": 0.8,
    "learning_rate": 3e-4,
    "samples_per_sec": 100.0,
}
FIELD_NAMES = [f"f{i}" for i in range(25)]


def per_step_ns(
    body: Callable[[int], None], steps: int, runs: int, between: Callable[[], object] = lambda: None
) -> float:
    """Median over runs of the mean cost of one step of ``body``, in nanoseconds.

    ``between`` runs untimed after each run: the monitor's drain, as the background thread would
    have done during the interval, so the buffer stays as small as it is in a real loop.
    """
    body(max(1, steps // 10))  # warm up
    between()
    means = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        body(steps)
        means.append((time.perf_counter_ns() - start) / steps)
        between()
    return statistics.median(means)


def floor(steps: int) -> None:
    out = []
    for i in range(steps):
        value = float(i)
        out.append(dict.fromkeys(FIELD_NAMES, value))


def monitor_body(monitor: TrainingMonitor, extra: bool) -> Callable[[int], None]:
    record, step, phase = monitor.record, monitor.step, monitor.phase

    def body(steps: int) -> None:
        batches = iter(monitor.wrap_dataloader(range(steps)))
        for _ in range(steps):
            next(batches)
            with step(tokens=4096, samples=8, seq_lens=SEQ_LENS):
                with phase("all_reduce"):
                    pass
                with phase("sync"):
                    pass
            record(loss=2.31, grad_norm=0.8, learning_rate=3e-4)
            if extra:
                record(**EXTRA_FIELDS)

    return body


def otel_body() -> tuple[Callable[[int], None], MeterProvider]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench")
    histograms = [meter.create_histogram(f"h{i}", unit="ms") for i in range(10)]
    gauges = [meter.create_gauge(f"g{i}") for i in range(15)]
    attrs = {"model": "llama-3-8b", "rank": 0}

    def body(steps: int) -> None:
        for i in range(steps):
            value = float(i)
            for h in histograms:
                h.record(value, attrs)
            for g in gauges:
                g.set(value, attrs)

    return body, provider


def drain_ns(monitor: TrainingMonitor, steps: int, runs: int) -> tuple[float, int]:
    """Median cost per step of draining ``steps`` buffered steps, and the report's field count."""
    fill = monitor_body(monitor, extra=False)
    costs, fields = [], 0
    for _ in range(runs):
        fill(steps)
        start = time.perf_counter_ns()
        sample = monitor.drain()
        costs.append((time.perf_counter_ns() - start) / steps)
        fields = len(to_dict(sample)) if sample else 0
    return statistics.median(costs), fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--steps", type=int, default=2_000)
    args = parser.parse_args()

    # A long interval keeps the background drain out of the hot-path figures; it is measured apart.
    monitor = TrainingMonitor(
        model_name="bench", interval=3600.0, hardware="none", flops_per_token=6e9, peak_flops=989e12, **JOB_FIELDS
    )
    body, provider = otel_body()
    try:
        results = {"floor": per_step_ns(floor, args.steps, args.runs)}
        results["monitor"] = per_step_ns(monitor_body(monitor, extra=False), args.steps, args.runs, monitor.drain)
        results["monitor+"] = per_step_ns(monitor_body(monitor, extra=True), args.steps, args.runs, monitor.drain)
        results["otel"] = per_step_ns(body, max(1, args.steps // 10), args.runs)
        monitor.drain()
        drain, fields = drain_ns(monitor, 1000, args.runs)
    finally:
        monitor.close()
        provider.shutdown()
    base = results["monitor"]
    print(f"hot path per training step: median of {args.runs} runs (python {sys.version.split()[0]})")
    print(f"{'':10} {'µs/step':>8} {'vs monitor':>11}")
    for name, ns in results.items():
        print(f"{name:10} {ns / 1000:8.2f} {ns / base:10.2f}x")
    print(f"drain      {drain / 1000:8.2f}  per step, on the background thread (1000-step intervals)")
    print(f"fields in the report built from the 'monitor' loop: {fields}")


if __name__ == "__main__":
    main()
