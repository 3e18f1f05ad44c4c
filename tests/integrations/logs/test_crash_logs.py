"""A real torchrun job whose rank 1 dies: its console log, replayed, names rank 1's death, not what it caused.

Three gloo ranks on the CPU (``crash_job.py``). When rank 1 raises, the others fail in their next all-reduce
with gloo's ``Connection closed by peer … typically caused by a remote worker crashing`` and torchrun sends them
SIGTERM; when rank 1 is killed, only torchrun's table says so. The log holds crashes of ranks 0 and 2, and
transport errors when the others reach their all-reduce before torchrun's SIGTERM reaches them (a race on a
loaded machine): the diagnosis must rank rank 1's failure first and count the rest as its consequences.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.runtime import replay_logs

pytest.importorskip("torch")  # the job's, in its own processes

#: A real three-process job: run alone, after the parallel pass (scripts/test).
pytestmark = [pytest.mark.serial, pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("crash_job.py")


def run_job(tmp_path: Path, how: str, port: int) -> Path:
    log = tmp_path / f"{how}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env.update(FAIL_HOW=how, FAIL_RANK="1", OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "3", "--master_port", str(port)]
    with log.open("w") as out:
        done = subprocess.run([*argv, str(JOB)], stdout=out, stderr=subprocess.STDOUT, env=env, timeout=180)
    assert done.returncode != 0, log.read_text()[-2000:]
    return log


@pytest.mark.parametrize(("how", "port", "why"), [("raise", 29731, "ValueError"), ("kill", 29732, "SIGKILL")])
def test_the_rank_that_died_first_is_the_root_cause_not_the_ranks_its_death_broke(tmp_path, how, port, why):
    log = run_job(tmp_path, how, port)
    done = replay_logs([str(log)], Settings())
    diagnosis = done.result.diagnosis
    top = diagnosis.root_causes[0]
    assert (top.cause, top.subject.get("rank")) == ("rank_failure", 1), diagnosis.to_dict()
    assert why in top.summary
    assert all(c.cause != "network_failure" for c in diagnosis.root_causes)  # the closed links are its doing
    crashed = {s.subject.get("rank") for s in diagnosis.signals if s.name == "rank_crashed"}
    assert {0, 1, 2} <= crashed  # the others' crashes are there, explained by rank 1's
    if "Connection closed by peer" in log.read_text():  # a race: torchrun may tear the others down first
        assert any(s.name == "network_error" for s in diagnosis.signals)
