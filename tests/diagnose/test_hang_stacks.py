"""Stacks in a hang: which frames are the training script's, the ranks grouped by stack, the odd ranks named
from them, ``rank_hang``'s summary and remediation at the script's line, and honest words when none stands out."""

from __future__ import annotations

from dataclasses import replace

from tests.diagnose.builders import T0, Harness, job
from tests.diagnose.frames import heartbeat_frame
from trainpulse_otel.diagnose.correlate import Evidence
from trainpulse_otel.diagnose.detectors.stall import TrainingStalled
from trainpulse_otel.diagnose.rootcause.hang import rank_hang
from trainpulse_otel.diagnose.stacks import is_library_file, odd_ranks, script_frame, stack_groups
from trainpulse_otel.diagnose.tick import NodeState
from trainpulse_otel.diagnose.types import CRITICAL, Signal
from trainpulse_otel.samples import Frame, RankSample, RankStack, StackFrame, TrainingSample

SCRIPT = "/home/me/jobs/train.py"
OUTER = (StackFrame("<frozen runpy>", 88, "_run_code"), StackFrame(SCRIPT, 120, "<module>"))
WAITING = (
    *OUTER,
    StackFrame(SCRIPT, 77, "train"),
    StackFrame("/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", 626, "backward"),
    StackFrame("/opt/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", 347, "backward"),
)
STUCK = (*OUTER, StackFrame(SCRIPT, 71, "train"), StackFrame(SCRIPT, 30, "load_batch"))
LIBRARY_ONLY = (StackFrame("/usr/lib/python3.12/threading.py", 355, "wait"),)


def test_which_files_are_the_training_scripts():
    for library in (
        "<frozen runpy>",
        "<string>",
        "/usr/lib/python3.12/threading.py",
        "/usr/lib64/python3.9/selectors.py",
        "/opt/conda/lib/python3.13t/queue.py",
        "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
        "/usr/lib/python3/dist-packages/numpy/core.py",
        "/src/pytorch/torch/distributed/distributed_c10d.py",  # torch built from source
        "/work/main/trainpulse_otel/integrations/monitor/recorder.py",  # an editable install
        "C:\\Python311\\Lib\\site-packages\\torch\\_tensor.py",
    ):
        assert is_library_file(library), library
    for script in (SCRIPT, "train.py", "/work/main/tests/integrations/monitor/gloo_worker.py", "/srv/lib/model.py"):
        assert not is_library_file(script), script
    assert script_frame(WAITING) == StackFrame(SCRIPT, 77, "train")  # the innermost of the script's, not torch's
    assert script_frame(STUCK) == StackFrame(SCRIPT, 30, "load_batch")
    assert script_frame(LIBRARY_ONLY) is None


def _ranks(n: int, step: int = 5, phase: str = "compute") -> tuple[RankSample, ...]:
    return tuple(RankSample(rank=r, global_step=step, phase=phase) for r in range(n))


def test_ranks_are_grouped_by_step_phase_and_stack_the_odd_first():
    stacks = tuple(RankStack(r, 5, "compute", STUCK if r == 2 else WAITING) for r in range(4))
    groups = stack_groups(_ranks(4), stacks)
    assert [g["ranks"] for g in groups] == [[2], [0, 1, 3]]
    assert groups[0]["phase"] == "compute" and groups[0]["global_step"] == 5
    assert groups[0]["frames"][-1] == {"file": SCRIPT, "line": 30, "function": "load_batch"}
    assert odd_ranks(groups) == [2]
    moved_on = (*_ranks(4)[:2], RankSample(rank=2, global_step=6, phase="compute"), _ranks(4)[3])
    assert [g["ranks"] for g in stack_groups(moved_on, stacks)] == [[0, 1, 3]]  # rank 2's stack is stale
    split = tuple(RankStack(r, 5, "compute", STUCK if r < 2 else WAITING) for r in range(4))
    assert odd_ranks(stack_groups(_ranks(4), split)) == []  # two halves: nothing stands out
    assert stack_groups(_ranks(4), ()) == []


def _no_hook_hang(t: float, stacks: tuple[RankStack, ...]) -> Frame:
    """Every rank says compute at the same step (DDP's all-reduce unmarked), since 60 s before the frame."""
    frame = heartbeat_frame(t, 24059, dict.fromkeys(range(8), "compute"), 60.0)
    return replace(frame, stacks=stacks)


def test_the_rank_whose_stack_differs_is_named_and_the_cause_starts_at_its_line():
    stacks = tuple(RankStack(r, 24059, "compute", STUCK if r == 5 else WAITING) for r in range(8))
    healthy = [job(float(t)) for t in range(60)]
    harness = Harness(TrainingStalled()).feed(healthy + [_no_hook_hang(float(t), stacks) for t in range(60, 100)])
    (signal,) = harness.active()
    evidence = signal.evidence
    assert evidence["inferred_from"] == "stacks" and [e["rank"] for e in evidence["lagging"]] == [5]
    assert [g["ranks"] for g in evidence["stacks"]] == [[5], [0, 1, 2, 3, 4, 6, 7]]
    (cause,) = rank_hang(Evidence((signal,), {}, NodeState(), T0 + 100))
    assert f"Rank 5 stands at {SCRIPT}:30 in load_batch" in cause.summary
    assert cause.remediation.startswith(f"Start at {SCRIPT}:30 in load_batch: rank 5 stands there")
    assert cause.evidence == {"stacks": evidence["stacks"]} and cause.subject["rank"] == 5


def test_heartbeats_that_single_out_a_rank_are_named_with_its_line():
    lagging = [{"rank": 3, "phase": "data", "pid": 41}]
    groups = [
        {"ranks": [3], "phase": "data", "global_step": 7, "frames": [f._asdict() for f in STUCK]},
        {"ranks": [0, 1, 2], "phase": "all_reduce", "global_step": 7, "frames": [f._asdict() for f in WAITING]},
    ]
    evidence = {"lagging": lagging, "inferred_from": "heartbeats", "heartbeat_ranks": 4, "stacks": groups}
    stall = Signal("training_stalled", CRITICAL, T0, "no training step has completed for 20 s", {}, evidence)
    (cause,) = rank_hang(Evidence((stall,), {}, NodeState(), T0))
    assert "found by its heartbeat. Rank 3 stands at /home/me/jobs/train.py:30 in load_batch" in cause.summary
    assert "py-spy dump --native --pid 41" in cause.remediation
    without = replace(stall, evidence={**evidence, "stacks": []})
    (plain,) = rank_hang(Evidence((without,), {}, NodeState(), T0))
    assert "stands at" not in plain.summary and plain.evidence == {}  # no stack: today's inference


def test_heartbeats_that_came_are_never_called_none():
    same = tuple(RankStack(r, 24059, "compute", WAITING) for r in range(8))  # one stack: nothing stands out
    healthy = [job(float(t)) for t in range(60)]
    harness = Harness(TrainingStalled()).feed(healthy + [_no_hook_hang(float(t), same) for t in range(60, 100)])
    (signal,) = harness.active()
    assert signal.evidence["lagging"] == [] and signal.evidence["heartbeat_rank_ids"] == list(range(8))
    (cause,) = rank_hang(Evidence((signal,), {}, NodeState(), T0 + 100))
    assert "no rank heartbeats" not in cause.summary and "no heartbeats" not in cause.summary
    assert "8 rank(s) sent heartbeats (0, 1, 2, 3, 4, 5, 6, 7)" in cause.summary
    silent = replace(signal, evidence={"lagging": [], "inferred_from": None})
    (unknown,) = rank_hang(Evidence((silent,), {}, NodeState(), T0))
    assert "no rank heartbeats came" in unknown.summary


def test_one_odd_stack_among_ranks_standing_alike_is_plain_enough_for_the_faster_threshold():
    """The monitor handed the inner module (DDP's all-reduce unmarked): every rank says compute, and only the
    stacks tell the hung rank from the peers waiting alike in backward — the 15 s rule, not the 30 s one."""
    stacks = tuple(RankStack(r, 24059, "compute", STUCK if r == 5 else WAITING) for r in range(8))
    healthy = [job(float(t)) for t in range(60)]  # the last step at 59
    wait = [replace(_no_hook_hang(float(t), stacks), training=_since(t, 59.0)) for t in range(60, 100)]
    harness = Harness(TrainingStalled()).feed(healthy + wait)
    assert harness.first_raise_s("training_stalled") == 59 + 15  # plain evidence: raised on the first reading past it
    (signal,) = harness.active()
    assert signal.evidence["threshold_s"] == 15.0 and signal.evidence["peers_waiting"] is True
    alike = tuple(RankStack(r, 24059, "compute", WAITING) for r in range(8))  # nothing stands out: 30 s
    same = [replace(_no_hook_hang(float(t), alike), training=_since(t, 59.0)) for t in range(60, 100)]
    assert Harness(TrainingStalled()).feed(healthy + same).first_raise_s("training_stalled") >= 59 + 30
    half = tuple(RankStack(r, 24059, "compute", STUCK if r < 4 else WAITING) for r in range(8))
    split = [replace(_no_hook_hang(float(t), half), training=_since(t, 59.0)) for t in range(60, 100)]
    assert Harness(TrainingStalled()).feed(healthy + split).first_raise_s("training_stalled") >= 59 + 30


def _since(t: int, last_step_s: float) -> TrainingSample:
    """Every rank in compute at step 24059 since the last step, as its heartbeat says at ``t``."""
    ranks = tuple(
        RankSample(rank=r, gpu_index=r, global_step=24059, phase="compute", phase_since=T0 + last_step_s + 0.1)
        for r in range(8)
    )
    return TrainingSample(ranks=ranks)
