"""Launch an N-process gloo DDP job on CPU (``gloo_worker.py``) and read rank 0's result.

Used by the distributed tests (short runs) and, from the command line, for the
minutes-long real runs documented in docs/signals.md ("Real jobs"):

    python -m tests.integrations.monitor.gloo_job --world 4 --seconds 150 [--slow-rank 2 --slow-after 60]
        [--hardware host --startup-mb 250] [--checkpoint-every 40 --checkpoint-mb 256] [--device-ms 60]
    python -m tests.integrations.monitor.gloo_job --world 4 --seconds 150 --hang-rank 3 --hang-after 40 --hang-s 60
    python -m tests.integrations.monitor.gloo_job --world 2 --seconds 40 --diverge-after 20 [--record trace.jsonl]
    python -m tests.integrations.monitor.gloo_job --ddp --world 3 --seconds 42 --hang-rank 2 --hang-after 6 --hang-s 30

prints when each signal and top root cause appeared and the final diagnosis;
``--record`` also writes rank 0's trace (JSON Lines) for ``trainpulse replay``.
``--ddp`` runs ``ddp_worker.py`` instead (torch's DDP, ``TrainingMonitor(model=ddp)`` and
``monitor.step()`` alone; ``--seconds``, ``--interval`` and the ``--hang-*`` options) and also
prints each ``rank_hang`` summary as first seen.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = Path(__file__).with_name("gloo_worker.py")
DDP_WORKER = Path(__file__).with_name("ddp_worker.py")
#: The options ddp_worker.py takes.
DDP_OPTIONS = ("seconds", "interval", "hang_rank", "hang_after", "hang_s")
ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A port nothing listens on now, for the job's rendezvous store (as torchrun's standalone mode picks one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(workdir: Path, world: int, timeout_s: float = 120.0, worker: Path = WORKER, **options: object) -> dict:
    """Run ``world`` worker processes with ``options`` (``slow_rank=1`` → ``--slow-rank 1``); rank 0's JSON.

    They rendezvous through ``env://`` on a free port, so rank 0's in-process monitor also gets the other
    ranks' heartbeats through the store. ``worker``: this folder's ``gloo_worker.py`` (a hand-written DDP step
    with manual phases), or ``ddp_worker.py`` (torch's DDP, ``TrainingMonitor(model=ddp)`` alone)."""
    out = workdir / "rank0.json"
    options = {"master_port": free_port(), **options}
    flags = []
    for key, value in options.items():  # a True value is a switch: the flag alone
        flags += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(rank), str(world), str(workdir / "store"), str(out), *flags],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank in range(world)
    ]
    try:
        logs = [p.communicate(timeout=timeout_s)[0].decode() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    return json.loads(out.read_text())


def ddp_summary(result: dict) -> str:
    """A ``ddp_worker.py`` run: the hang, the timeline and each ``rank_hang`` summary as first seen."""
    lines = [f"{result['world']} processes (DDP), {result['steps']} steps in {result['seconds']} s"]
    if result.get("hang_from_s") is not None:
        lines.append(f"  rank {result['hang_rank']} blocked from {result['hang_from_s']} s for {result['hang_s']} s")
    lines += [
        f"  {e['t']:7.1f} s  {e['event']:9s} {e.get('signal') or e.get('cause')} {e['subject']}"
        for e in result["timeline"]
    ]
    lines += [f"  {cause['t']:7.1f} s  rank_hang: {cause['summary']}" for cause in result["hang_causes"]]
    return "\n".join(lines)


def summary(result: dict) -> str:
    """The run in a few lines: shape, the timeline, and the final health and causes."""
    head = f"{result['world']} processes, {result['steps']} steps in {result['seconds']} s"
    slow = f"slow rank {result['slow_rank']} from {result['slow_from_s']} s (step {result['slow_from_step']})"
    lines = [f"{head}; {slow}"]
    if result.get("hang_from_s") is not None:
        lines.append(f"  rank {result['hang_rank']} blocked from {result['hang_from_s']} s for {result['hang_s']} s")
    if result.get("diverge_from_s") is not None:
        lines.append(f"  learning rate blown up from {result['diverge_from_s']} s (step {result['diverge_from_step']})")
    for e in result["timeline"]:
        what = e.get("signal") or e.get("cause")
        load = f"  (load {e['load1']})" if "load1" in e else ""
        lines.append(f"  {e['t']:7.1f} s  step {e['step']:5d}  {e['event']:9s} {what} {e['subject']}{load}")
    diagnosis = result["diagnosis"]
    causes = [(c["cause"], c.get("subject"), c["confidence"]) for c in diagnosis["root_causes"]]
    lines.append(f"  final: health {diagnosis['health']}; signals {[s['name'] for s in diagnosis['signals']]}")
    lines.append(f"  root causes {causes}")
    ranks = sorted(result["training"]["ranks"], key=lambda r: r["rank"])
    saves = result.get("checkpoint_saves_s") or []
    if saves:
        badput = (diagnosis.get("goodput") or {}).get("badput_s", {})
        stall = next((s for s in diagnosis["signals"] if s["name"] == "checkpoint_stall"), None)
        lines.append(
            f"  checkpoints: {len(saves)} saves, {sum(saves):.2f} s measured by the saving rank "
            f"({100 * recent_save_share(result):.0f} % of the last 2 minutes); badput checkpoint_io_bound "
            f"{badput.get('checkpoint_io_bound', 0.0):.2f} s; checkpoint_stall blocked_share "
            + (f"{100 * stall['evidence']['blocked_share']:.0f} %" if stall else "-")
        )
    lines.append(f"  goodput {diagnosis.get('goodput')}")
    lines.append(
        "  last report per rank (busy / sync ms): "
        + ", ".join(f"{r['rank']}: {r['step_time_ms']:.1f} / {r['sync_wait_ms']:.1f}" for r in ranks)
    )
    return "\n".join(lines)


def recent_save_share(result: dict, span_s: float = 120.0) -> float:
    """The share of the run's last ``span_s`` (all of it, when shorter) the saving rank spent saving."""
    ends = result["checkpoint_save_ends_s"]
    saves = result["checkpoint_saves_s"]
    end = result["seconds"]
    recent = sum(s for s, t in zip(saves, ends, strict=True) if t > end - span_s)
    return recent / min(span_s, end)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--seconds", type=float, default=150.0)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-after", type=float, default=60.0, help="seconds before the slow rank slows")
    p.add_argument("--extra", type=float, default=0.35)
    p.add_argument("--device-ms", type=float, default=0.0, help="each rank's step also waits this long on 'its GPU'")
    p.add_argument("--hardware", default="none", help="none, or host: rank 0's monitor also collects the host")
    p.add_argument("--startup-mb", type=float, default=0.0, help="host memory each rank allocates at start")
    p.add_argument("--checkpoint-every", type=int, default=0, help="rank 0 saves a checkpoint every N steps")
    p.add_argument("--checkpoint-mb", type=float, default=64.0)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-after", type=float, default=40.0, help="seconds before the hang rank blocks")
    p.add_argument("--hang-s", type=float, default=40.0, help="how long it blocks")
    p.add_argument("--interval", type=float, default=0.25, help="the monitor's report interval (its default is 1 s)")
    p.add_argument("--diverge-after", type=float, help="seconds before the learning rate blows up (the loss goes NaN)")
    p.add_argument("--record", help="rank 0's monitor records its trace (JSON Lines) to this file")
    p.add_argument("--json", help="also write rank 0's result here")
    p.add_argument("--ddp", action="store_true", help="run ddp_worker.py: torch's DDP with TrainingMonitor(model=)")
    p.add_argument("--no-hook", action="store_true", help="with --ddp: mark_all_reduce=False, the stacks alone")
    args = p.parse_args()
    skip = {"world", "json", "ddp", "no_hook"} | (
        {"hang_rank", "hang_after", "hang_s"} if args.hang_rank < 0 else set()
    )
    options: dict[str, object] = {k: v for k, v in vars(args).items() if k not in skip and v is not None}
    if args.ddp:
        options = {k: v for k, v in options.items() if k in DDP_OPTIONS}
    if args.record:
        options["record"] = str(Path(args.record).resolve())  # rank 0 writes it, wherever it runs
    if args.ddp and args.no_hook:
        options["no_hook"] = True
    worker = DDP_WORKER if args.ddp else WORKER
    with tempfile.TemporaryDirectory() as tmp:
        result = run_job(Path(tmp), args.world, timeout_s=args.seconds + 120, worker=worker, **options)
    if args.json:
        Path(args.json).write_text(json.dumps(result), encoding="utf-8")
    print(ddp_summary(result) if args.ddp else summary(result))


if __name__ == "__main__":
    main()
