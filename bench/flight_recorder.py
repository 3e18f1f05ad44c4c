"""How long reading and comparing a hung job's Flight Recorder dumps takes: ``--ranks`` dumps of ``--entries`` each.

Makes one real dump with torch (a one-rank gloo job in a subprocess, ``_dump_fr_trace()``: its entries carry
their stack frames), then each rank's dump from it as a full ring buffer: ``--entries`` all-reduces renumbered,
the last rank one short (it never called the last). Times, as the daemon does them, the safe unpickling and
parsing of every dump (:func:`~trainpulse_otel.logs.flight_recorder.parse_dump`) and their comparison
(:func:`~trainpulse_otel.logs.flight_analysis.analyse`), median of ``--runs``, against a baseline in the same
run: plain ``pickle.loads`` of the same bytes (what the restriction and the parsing add). And the dumps' size.

    python bench/flight_recorder.py [--ranks 64] [--entries 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainpulse_otel.logs.flight_analysis import analyse
from trainpulse_otel.logs.flight_recorder import load, parse_dump

JOB = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
dist.all_reduce(torch.ones(16, 4))
open(sys.argv[2], "wb").write(torch._C._distributed_c10d._dump_fr_trace())
"""


def real_dump(directory: Path) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (directory / "job.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    subprocess.run([sys.executable, str(directory / "job.py"), str(port), str(directory / "one")], check=True, env=env)
    return dict(load((directory / "one").read_bytes(), "one"))


def fresh(entry: dict, i: int) -> dict:
    """Entry ``i``: the real one with its own copy of every string and list, as torch writes each entry anew (a
    pickle of shared objects would be smaller than a real dump)."""
    own = pickle.loads(pickle.dumps(entry))  # noqa: S301 - the bench's own data
    own.update(record_id=i, collective_seq_id=i + 1, op_id=i + 1)
    return own


def dumps(base: dict, ranks: int, entries: int) -> list[bytes]:
    entry = base["entries"][0]
    out = []
    for rank in range(ranks):
        data = copy.deepcopy(base)
        data["pg_config"] = {k: {**v, "ranks": str(list(range(ranks)))} for k, v in data["pg_config"].items()}
        count = entries - (1 if rank == ranks - 1 else 0)
        data["entries"] = [fresh(entry, i) for i in range(count)]
        out.append(pickle.dumps(data, protocol=2))  # as torch writes it
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        blobs = dumps(real_dump(Path(tmp)), args.ranks, args.entries)
    parse_s, analyse_s, plain_s = [], [], []
    for _ in range(args.runs):
        began = time.perf_counter()
        kept = [pickle.loads(blob) for blob in blobs]  # noqa: S301 - the baseline: the bench's own data
        plain_s.append(time.perf_counter() - began)
        del kept
        began = time.perf_counter()
        parsed = [parse_dump(blob, f"rank_{r}", r) for r, blob in enumerate(blobs)]
        parse_s.append(time.perf_counter() - began)
        began = time.perf_counter()
        (found,) = analyse(parsed)
        analyse_s.append(time.perf_counter() - began)
        if found.missing != (args.ranks - 1,) or found.seq != args.entries:
            raise SystemExit(f"wrong answer: {found.missing} at #{found.seq}")
    size = sum(map(len, blobs))
    print(f"{args.ranks} dumps of {args.entries} entries: {size / args.ranks / 2**20:.2f} MiB each")
    per_entry_us = statistics.median(parse_s) / (args.ranks * args.entries) * 1e6
    print(f"read (safe unpickler, parse): {statistics.median(parse_s):.2f} s, {per_entry_us:.1f} µs an entry")
    print(f"  baseline, plain pickle.loads of the same bytes: {statistics.median(plain_s):.2f} s")
    print(f"analyse: {statistics.median(analyse_s):.3f} s; names rank {args.ranks - 1} missing from #{args.entries}")


if __name__ == "__main__":
    main()
