"""A real three-rank gloo job hangs: rank 2 never calls the all-reduce ranks 0 and 1 wait in.

The job (``fr_job.py``) writes each rank's real Flight Recorder dump (torch 2.7+ records gloo's collectives
too) to ``PREFIX<rank>`` once its all-reduce timed out. A real daemon told only ``-flight-recorder PREFIX``
raises ``collective_timeout`` on ranks 0 and 1 naming rank 2 missing, and ``rank_hang`` on rank 2; the same
dumps, read by the parser directly, name the op, its sequence number and the states.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.daemons import SimDaemon
from tests.exports.receivers import free_port
from trainpulse_otel.logs.flight_analysis import analyse
from trainpulse_otel.logs.flight_recorder import parse_dump

pytest.importorskip("torch")

#: A real multi-process job: run alone, after the parallel pass (scripts/test).
pytestmark = [pytest.mark.serial, pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("fr_job.py")
WORLD, SKIP, STEPS = 3, 2, 3


def run_job(prefix: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env["TORCH_FR_BUFFER_SIZE"] = "2000"  # the default in torch 2.13; said, as a job would
    argv = [str(free_port()), str(prefix), "--skip", str(SKIP), "--steps", str(STEPS), "--timeout", "3"]
    ranks = [
        subprocess.Popen([sys.executable, str(JOB), str(r), str(WORLD), *argv], env=env, stdout=subprocess.DEVNULL)
        for r in range(WORLD)
    ]
    try:
        assert [rank.wait(timeout=60) for rank in ranks] == [0] * WORLD
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()


def test_a_real_hung_gloo_job_s_dumps_name_the_rank_that_never_joined(tmp_path):
    prefix = tmp_path / "fr" / "rank_"
    prefix.parent.mkdir()
    daemon = SimDaemon("-flight-recorder", str(prefix), "-interval", "500ms", mode="none")
    try:
        run_job(prefix)
        files = sorted(prefix.parent.iterdir())
        assert [f.name for f in files] == [f"rank_{r}" for r in range(WORLD)]

        dumps = [parse_dump(f.read_bytes(), str(f), r) for r, f in enumerate(files)]
        (m,) = analyse(dumps)
        assert (m.op, m.seq, m.pg_desc, m.missing, m.joined) == (
            "gloo:all_reduce",
            STEPS + 1,
            "default_pg",
            (2,),
            (0, 1),
        )
        assert set(m.states.values()) <= {"scheduled", "started"} and m.entry.call_site.startswith(str(JOB))

        snap = daemon.snapshot_when(
            lambda s: any(g["name"] == "collective_timeout" for g in s["diagnosis"]["signals"]), timeout=15
        )
        signal = next(g for g in snap["diagnosis"]["signals"] if g["name"] == "collective_timeout")
        assert signal["subject"] == {"ranks": [0, 1]}
        evidence = signal["evidence"]
        assert evidence["missing_ranks"] == [SKIP] and evidence["flight_recorder"] is True
        assert evidence["op"] == "all_reduce" and evidence["seq"] == STEPS + 1
        assert sorted(evidence["lines"]) == [str(files[0]), str(files[1])]
        assert "never joined it (Flight Recorder)" in signal["message"]
        hang = next(c for c in snap["diagnosis"]["root_causes"] if c["cause"] == "rank_hang")
        assert hang["subject"] == {"rank": SKIP} and "Flight Recorder" in hang["summary"]
        assert snap["collectors"] == ["flight_recorder"]
    finally:
        daemon.proc.terminate()
        daemon.proc.wait(timeout=30)
    assert any("Flight Recorder: all_reduce" in line and "rank(s) 2 never joined it" in line for line in daemon.lines)
    assert not json.dumps(snap).count("Traceback")
