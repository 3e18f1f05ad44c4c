"""docs/actions.md's recipes as written: every config block loads and names known signals, and the Slurm and py-spy
command lines, run by a real action, ask ``scontrol`` and ``py-spy`` (stand-ins on PATH recording their argv) what
the recipe says, with the signal's host, GPU, rank and pid."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.actions.runs import raised, runner
from trainpulse_otel.actions import check_actions
from trainpulse_otel.config import load_settings
from trainpulse_otel.diagnose import Diagnosis, PipelineResult, Signal, Transition
from trainpulse_otel.diagnose.builtins import VOCABULARY

DOC = Path(__file__).resolve().parents[2] / "docs" / "actions.md"
BLOCKS = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.DOTALL)]
CONFIGS = {a.name: a for block in BLOCKS if "actions" in block for a in load_settings(
    environ={"TRAINPULSE_ACTIONS": json.dumps(block["actions"])}).actions}  # fmt: skip
#: A stand-in for a tool: records its argv, one JSON line per call.
RECORDER = "#!{python}\nimport json, sys\nopen({out!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"


def test_every_config_block_loads_and_names_what_the_vocabulary_declares():
    assert {"slurm-drain", "py-spy", "page"} <= set(CONFIGS)
    check_actions(CONFIGS.values(), VOCABULARY.signal_names, VOCABULARY.cause_names)


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """``scontrol`` and ``py-spy`` on PATH, each recording what it was asked in ``calls/TOOL``."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    for tool in ("scontrol", "py-spy"):
        path = bin_dir / tool
        path.write_text(RECORDER.format(python=sys.executable, out=str(calls / tool)))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return lambda tool: [json.loads(line) for line in (calls / tool).read_text().splitlines()]


def gpu_failing(ts: float, gpu: int) -> PipelineResult:
    subject = {"gpu_index": gpu, "hostname": "node-7.cluster.local"}
    signal = Signal("gpu_hardware_fault", "critical", ts, f"GPU {gpu}: XID 79 (fallen off the bus)", subject)
    transition = Transition(ts, "raised", signal.name, "critical", subject, signal.message)
    return PipelineResult(Diagnosis(ts, signals=(signal,)), (transition,))


def test_the_slurm_recipe_drains_the_failing_gpus_node_once_an_hour(tools):
    drain = CONFIGS["slurm-drain"]
    run, counts = runner({"on": {"signal": drain.signal, "severity": drain.severity}, "run": list(drain.run)})
    run.offer(gpu_failing(100.0, 3), 100.0)
    run.offer(gpu_failing(200.0, 3), 200.0)  # the same GPU within the hour
    run.close()
    assert tools("scontrol") == [
        ["update", "nodename=node-7", "state=drain", "reason=trainpulse: GPU 3 failing (gpu_hardware_fault)"]
    ]
    assert sorted(outcome for _, outcome in counts) == ["cooldown", "ok"]


def test_the_py_spy_recipe_dumps_the_stuck_ranks_pid(tools, tmp_path):
    dump = CONFIGS["py-spy"]
    argv = [arg.replace("/var/log/trainpulse", str(tmp_path / "stacks")) for arg in dump.run]
    run, counts = runner({"on": {"signal": dump.signal}, "run": argv})
    run.offer(raised(100.0, rank=3, severity="critical", pid=4242), 100.0)
    run.close()
    assert tools("py-spy") == [["dump", "--pid", "4242"]]
    assert [p.name.startswith("stack-rank3-") for p in (tmp_path / "stacks").iterdir()] == [True]
    assert counts == [("run:sh", "ok")]


def test_the_page_recipe_runs_the_shipped_alertmanager_command():
    page = CONFIGS["page"]
    assert page.run[1:3] == ("-m", "trainpulse_otel.actions.alertmanager") and page.severity == "critical"
