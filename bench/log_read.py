"""How fast a Megatron console log is read: 100,000 lines, NCCL INFO noise between the iteration lines.

Builds the log from real lines (tests/fixtures/logs: a 2025 Megatron-LM run's stamped iteration lines,
its ``(min, max)`` timer and ``save-checkpoint`` blocks, ``NCCL_DEBUG=INFO`` lines of a 2022 Megatron run),
renumbering the iterations and their stamps: per iteration, its line and ``--noise`` NCCL lines, a timer block
every 10th, a save every 100th. Then reads it ``--runs`` times through :class:`~trainpulse_otel.logs.LogReader`
(the reader alone: a ``LogLine`` per line, ``feed``, ``flush``) and prints the median lines/s against a baseline
in the same run — the least any reader does per line: cut its prefixes (``split_prefixes``) — and replays it
once as ``trainpulse replay`` does (``read_logs`` and the full diagnostic pipeline) and prints its time.

    python bench/log_read.py [--lines 100000] [--noise 8] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from trainpulse_otel.collect.logfile import read_logs
from trainpulse_otel.config import Settings
from trainpulse_otel.logs import LogLine, LogReader, split_prefixes
from trainpulse_otel.runtime import discover, open_replay
from trainpulse_otel.runtime.replay import replay

LOGS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
SOURCE = LOGS / "megatron" / "2025_fp16_startup_timers_checkpoint.log"
NOISE = LOGS / "noise" / "nccl_info_2022.txt"
START = 1_744_587_672  # the source's first iteration stamp


def source_lines() -> tuple[str, list[str], list[str]]:
    """The source's iteration line at 50, its evaluate block (timers) and its save block (3 lines + timers)."""
    lines = SOURCE.read_text().splitlines()
    iteration = next(line for line in lines if "iteration       50/" in line)
    block_at = next(i for i, line in enumerate(lines) if "evaluate ......" in line)
    timers = lines[block_at - 1 : block_at + 1]
    save_at = next(i for i, line in enumerate(lines) if line.startswith("saving checkpoint at iteration"))
    save = [lines[save_at], lines[save_at + 3], *lines[save_at + 4 : save_at + 6]]
    return iteration, timers, save


def build(total: int, noise_per_iteration: int) -> list[str]:
    """``total`` lines: iteration lines renumbered 1, 2, ... one second apart, the noise between them."""
    iteration, timers, save = source_lines()
    _, rest = iteration.split("] iteration       50/", 1)
    noise = NOISE.read_text().splitlines()
    out: list[str] = []
    step = 0
    while len(out) < total:
        step += 1
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(START + step))
        out.append(f" [{when}] iteration {step:8d}/{rest}")
        out.extend(noise[(step + i) % len(noise)] for i in range(noise_per_iteration))
        if step % 10 == 0:
            out.extend(timers)
        if step % 100 == 0:
            out.extend(save)
    return out[:total]


def read_once(lines: list[str]) -> tuple[float, LogReader]:
    reader = LogReader(start=float(START))
    begin = time.perf_counter()
    for number, text in enumerate(lines, 1):
        reader.feed(LogLine(text, "train.log", number))
    reader.flush()
    return time.perf_counter() - begin, reader


def split_once(lines: list[str]) -> float:
    """The baseline: each line's prefixes cut, nothing parsed."""
    begin = time.perf_counter()
    for text in lines:
        split_prefixes(text)
    return time.perf_counter() - begin


def replay_once(path: str) -> tuple[float, int, LogReader]:
    reader = LogReader(start=float(START))
    stepper = open_replay(Settings(), discover(autoload=False))
    begin = time.perf_counter()
    result = replay(read_logs([path], reader), stepper, interval_s=1.0)
    return time.perf_counter() - begin, result.ticks, reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--noise", type=int, default=8, help="NCCL INFO lines after each iteration line")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    lines = build(args.lines, args.noise)
    times = []
    for _ in range(args.runs):
        seconds, reader = read_once(lines)
        times.append(seconds)
    median = statistics.median(times)
    baseline = statistics.median(split_once(lines) for _ in range(args.runs))
    s = reader.stats
    print(
        f"reader: {len(lines)} lines, median {median:.3f} s over {args.runs} runs = {len(lines) / median:,.0f} lines/s"
    )
    print(
        f"baseline (prefixes cut only): median {baseline:.3f} s = {len(lines) / baseline:,.0f} lines/s; "
        f"reader / baseline = {median / baseline:.1f}x"
    )
    print(f"        {s.reports} reports, {s.unknown} lines not understood, {s.events} failure events")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "train.log")
        Path(path).write_text("\n".join(lines) + "\n")
        seconds, ticks, reader = replay_once(path)
    print(f"replay: {seconds:.2f} s for the whole file ({ticks} ticks, {reader.stats.reports} reports)")


if __name__ == "__main__":
    main()
