"""What ``daemon -follow`` costs: 64 log files written at 2,000 lines/s in all, the follower's CPU.

A writer process appends real lines (bench/log_read.py's: a 2025 Megatron-LM run's stamped iteration lines,
renumbered, with ``--noise`` ``NCCL_DEBUG=INFO`` lines of a 2022 Megatron run after each, a timer block every
10th iteration and a save every 100th) to ``--files`` files, round-robin, in batches every 50 ms, at
``--rate`` lines/s in all. Each run measures, over ``--seconds``:

- collector: a :class:`~trainpulse_otel.collect.follow.FollowCollector` over the files, ``collect()`` once a
  second in this process, timed by ``time.thread_time`` around each call (the tailer and the reader: what the
  follower adds to a tick);
- daemon: a real ``trainpulse daemon -mode none -interval 1s -follow DIR/*.log``, its CPU (psutil ``cpu_times``
  over wall time), and the same daemon without ``-follow`` as its baseline (ticks, diagnosis, an idle API):
  their difference is the follower's share of a daemon, the reports it feeds the pipeline included.

Prints the median of ``--runs`` runs, as % of one core, and the lines read (the follower keeps up when they
match the lines written).

    python bench/follow.py [--files 64] [--rate 2000] [--seconds 30] [--runs 3] [--noise 8]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

from trainpulse_otel.collect.follow import FollowCollector

sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_read import build  # bench/ is not a package: its sibling is on the path from here

BATCH_S = 0.05
LISTENING = re.compile(r"API listening on (http://\S+)")


def write(directory: str, files: int, rate: float, seconds: float, noise: int) -> None:
    """The writer (its own process): ``rate`` lines/s over ``files`` files for ``seconds``, then exit."""
    lines = [line.encode() + b"\n" for line in build(20_000, noise)]
    fds = [os.open(os.path.join(directory, f"rank{n}.log"), os.O_WRONLY | os.O_APPEND) for n in range(files)]
    per_batch, written, begin = rate * BATCH_S, 0.0, time.monotonic()
    batch = 0
    while time.monotonic() - begin < seconds:
        written += per_batch
        for n in range(int(written)):
            os.write(fds[(batch + n) % files], lines[(batch * 7 + n) % len(lines)])
        written -= int(written)
        batch += 1
        time.sleep(max(0.0, begin + batch * BATCH_S - time.monotonic()))
    for fd in fds:
        os.close(fd)


def start_writer(directory: str, args: argparse.Namespace, seconds: float) -> subprocess.Popen:
    argv = [sys.executable, __file__, "--write", directory, "--files", str(args.files), "--rate", str(args.rate)]
    return subprocess.Popen([*argv, "--seconds", str(seconds), "--noise", str(args.noise)])


def fresh_files(directory: str, files: int) -> None:
    for n in range(files):
        Path(directory, f"rank{n}.log").write_text("")


def collector_run(args: argparse.Namespace) -> tuple[float, int]:
    """The collector's CPU (% of a core) over ``--seconds`` and the lines it read."""
    with tempfile.TemporaryDirectory() as directory:
        fresh_files(directory, args.files)
        follow = FollowCollector([os.path.join(directory, "*.log")])
        follow.collect(time.time())  # the files are found and opened (empty: nothing is history)
        writer = start_writer(directory, args, args.seconds)
        cpu, begin = 0.0, time.monotonic()
        while time.monotonic() - begin < args.seconds + 1.5:  # the last lines written too
            time.sleep(max(0.0, 1.0 - (time.monotonic() - begin) % 1.0))
            before = time.thread_time()
            follow.collect(time.time())
            cpu += time.thread_time() - before
        writer.wait()
        lines = follow.reader.stats.lines
        follow.close()
    return 100.0 * cpu / args.seconds, lines


def daemon_run(args: argparse.Namespace, follow: bool) -> tuple[float, int]:
    """A daemon's CPU (% of a core) over ``--seconds`` with the writer running, and the lines it counted."""
    with tempfile.TemporaryDirectory() as directory:
        fresh_files(directory, args.files)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
        env["TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        argv = [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "none", "-addr", "127.0.0.1:0"]
        argv += ["-interval", "1s", *(["-follow", os.path.join(directory, "*.log")] if follow else [])]
        proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
        try:
            url = _listening(proc)
            time.sleep(3.0)  # its first ticks: the files opened, start-up's work done
            writer = start_writer(directory, args, args.seconds + 2.0)
            time.sleep(1.0)
            daemon = psutil.Process(proc.pid)
            before, begin = daemon.cpu_times(), time.monotonic()
            time.sleep(args.seconds)
            after, wall = daemon.cpu_times(), time.monotonic() - begin
            writer.wait()
            time.sleep(2.5)
            lines = _lines_counted(url)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    cpu = (after.user - before.user) + (after.system - before.system)
    return 100.0 * cpu / wall, lines


def _listening(proc: subprocess.Popen) -> str:
    """The daemon's URL; its log is read on (and dropped) by a thread, so it never blocks on a full pipe."""
    for line in proc.stderr or ():
        if match := LISTENING.search(line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
            return match[1]
    raise RuntimeError("the daemon did not start")


def _lines_counted(url: str) -> int:
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()  # noqa: S310 - the daemon's http URL
    counted = re.findall(r"^trainpulse_logs_lines_total\{[^}]*\} ([0-9.e+]+)$", text, re.MULTILINE)
    return int(sum(float(n) for n in counted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--rate", type=float, default=2000.0, help="lines/s over all files")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--noise", type=int, default=8, help="NCCL INFO lines after each iteration line")
    parser.add_argument("--write", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write(args.write, args.files, args.rate, args.seconds, args.noise)
        return
    print(f"{args.files} files, {args.rate:,.0f} lines/s in all, {args.seconds:g} s a run, {args.runs} runs")
    results: dict[str, list[tuple[float, int]]] = {"collector": [], "daemon": [], "baseline": []}
    for _ in range(args.runs):
        results["collector"].append(collector_run(args))
        results["daemon"].append(daemon_run(args, follow=True))
        results["baseline"].append(daemon_run(args, follow=False))
    for name, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        lines = statistics.median(r[1] for r in runs)
        each = ", ".join(f"{r[0]:.1f}" for r in runs)
        written = args.rate * (args.seconds + (2.0 if name == "daemon" else 0.0))
        read = f"; lines read {lines:,.0f} (~{written:,.0f} written)" if name != "baseline" else ""
        print(f"{name:<9} {cpu:5.1f} % of a core (runs: {each}){read}")
    share = statistics.median(r[0] for r in results["daemon"]) - statistics.median(r[0] for r in results["baseline"])
    print(f"follower's share of the daemon: {share:.1f} % of a core")


if __name__ == "__main__":
    main()
