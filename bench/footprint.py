"""Daemon footprint: CPU share and RSS of `trainpulse daemon -mode sim` at a 1 s interval.

Measures, in the same session and the same way (psutil CPU times over
``--seconds`` after ``--warmup``):
  daemon     `trainpulse daemon -mode sim -interval 1s` (8 GPUs, 8 ranks, diagnosis, API idle)
  baseline   an idle loop reading psutil host metrics into OTel observable gauges once a second
and prints the CPU share of one core and the RSS of each, with the ratio.

    python bench/footprint.py [--seconds 60] [--warmup 20]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import psutil

BASELINE = """
import time, psutil
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
reader = InMemoryMetricReader()
meter = MeterProvider(metric_readers=[reader]).get_meter("baseline")
meter.create_observable_gauge("cpu", callbacks=[lambda o: [Observation(psutil.cpu_percent())]])
meter.create_observable_gauge("mem", callbacks=[lambda o: [Observation(psutil.virtual_memory().available)]])
while True:
    reader.get_metrics_data()
    time.sleep(1)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(cmd: list[str], seconds: float, warmup: float) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc = psutil.Process(child.pid)
        time.sleep(warmup)
        before, started = proc.cpu_times(), time.monotonic()
        time.sleep(seconds)
        after, elapsed = proc.cpu_times(), time.monotonic() - started
        cpu = (after.user + after.system - before.user - before.system) / elapsed
        return cpu, proc.memory_info().rss
    finally:
        child.terminate()
        child.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    args = parser.parse_args()
    daemon = [
        sys.executable,
        "-m",
        "trainpulse_otel",
        "daemon",
        "-mode",
        "sim",
        "-interval",
        "1s",
        "-addr",
        f"127.0.0.1:{free_port()}",
        "-log-level",
        "warning",
    ]
    results = {
        "daemon": measure(daemon, args.seconds, args.warmup),
        "baseline": measure([sys.executable, "-c", BASELINE], args.seconds, args.warmup),
    }
    print(f"CPU over {args.seconds:g} s after a {args.warmup:g} s warm-up:")
    for name, (cpu, rss) in results.items():
        print(f"  {name:<9} {cpu:7.2%} of one core   RSS {rss / 2**20:6.1f} MiB")
    ratio = results["daemon"][0] / max(results["baseline"][0], 1e-9)
    print(f"  daemon/baseline CPU: {ratio:.1f}x")


if __name__ == "__main__":
    main()
