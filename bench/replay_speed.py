"""How fast `trainpulse replay` diagnoses a trace (8 GPUs, 8 ranks, 1 s ticks).

Writes a healthy simulated trace of ``--hours`` to a temporary JSONL file, then
replays it ``--runs`` times three ways, in this process:
  read      JSON parsing and validation of every line only (the floor)
  frames    read + grouping into ticks + the samples → points → frame conversion
  replay    the full replay: frames + window + the diagnostic pipeline
and prints the median ticks per second of each, the pipeline's share, and the
projected time to diagnose a 24-hour trace. With ``--base REF`` it then
replays the same trace with ``REF``'s package beside this tree's (exported by
``bench/versus.py``), the two alternating run by run so a busy machine slows
both alike, and prints each one's median, their ratio and whether both reach
the same diagnosis.

    python bench/replay_speed.py [--hours 1] [--runs 3] [--base main]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from versus import Side, export_base

import trainpulse_otel
from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.collect.trace import bounded_lines, encode_line, read_trace
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime import discover, open_replay
from trainpulse_otel.runtime.replay import TraceFeed, group_ticks, replay

PLUGINS = discover(autoload=False)

DAY_S = 86_400


def write_trace(path: str, seconds: int) -> None:
    """A healthy 8-GPU trace, one tick per second, as the daemon records it."""
    node = SimulatedNode("healthy")
    with open(path, "w", encoding="utf-8") as fh:
        for t in range(seconds):
            seen = node.sample(float(t))
            ts = 1_764_400_000.0 + t
            fh.write(encode_line(ts, "gpus", seen.gpus))
            fh.write(encode_line(ts, "host", seen.host))
            if seen.training is not None:
                fh.write(encode_line(ts, "training", seen.training))


def read_only(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in group_ticks(read_trace(bounded_lines(fh), [])))


def frames_only(path: str) -> int:
    stepper = open_replay(Settings(), PLUGINS)
    feed = TraceFeed(stepper.latest)
    with open(path, "rb") as fh:
        return sum(
            1 for group in group_ticks(read_trace(bounded_lines(fh), [])) if stepper.frames.read(feed.apply(group))
        )


def full_replay(path: str) -> int:
    with open(path, "rb") as fh:
        return replay(read_trace(bounded_lines(fh), []), open_replay(Settings(), PLUGINS)).ticks


def ticks_per_second(run: Callable[[str], int], path: str, runs: int) -> float:
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        ticks = run(path)
        rates.append(ticks / (time.perf_counter() - start))
    return statistics.median(rates)


def versus(base: str, path: str, runs: int, tmp: str) -> None:
    """The full replay of ``path`` with ``base``'s package and with this tree's, alternating, ``runs`` each."""
    sides = {base: Side(export_base(base, Path(tmp) / "base")), "this tree": Side(trainpulse_otel)}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    diagnoses: dict[str, list[dict]] = {name: [] for name in sides}
    for i in range(runs):
        for name in list(sides) if i % 2 else list(sides)[::-1]:
            start = time.perf_counter()
            result = sides[name].replay_file(path)
            rates[name].append(result.ticks / (time.perf_counter() - start))
            diagnoses[name].append(result.to_dict())
    medians = {name: statistics.median(r) for name, r in rates.items()}
    print(f"side by side, median of {runs} alternating runs each:")
    for name, rate in medians.items():
        print(f"  {name:<12} {rate:8.0f} ticks/s")
    same = all(d == diagnoses[base][0] for ds in diagnoses.values() for d in ds)
    print(f"  this tree / {base}: {medians['this tree'] / medians[base]:.2f}x   same diagnosis: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base", help="a git ref to replay the same trace with, side by side")
    args = parser.parse_args()
    seconds = int(args.hours * 3600)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.jsonl")
        write_trace(path, seconds)
        size_mb = os.path.getsize(path) / 1e6
        print(f"trace: {seconds} ticks, {size_mb:.1f} MB; median of {args.runs} runs")
        rates = {
            name: ticks_per_second(fn, path, args.runs)
            for name, fn in (("read", read_only), ("frames", frames_only), ("replay", full_replay))
        }
        show(rates)
        if args.base:
            versus(args.base, path, args.runs, tmp)


def show(rates: dict[str, float]) -> None:
    for name, rate in rates.items():
        print(f"  {name:<7} {rate:8.0f} ticks/s  ({rates['replay'] / rate:.2f}x replay's rate)")
    per_tick_ms = {name: 1e3 / rate for name, rate in rates.items()}
    print(
        f"  pipeline share: {per_tick_ms['replay'] - per_tick_ms['frames']:.3f} ms/tick of "
        f"{per_tick_ms['replay']:.3f} ms/tick"
    )
    print(f"  24-hour trace: {DAY_S / rates['replay']:.1f} s to diagnose")


if __name__ == "__main__":
    main()
