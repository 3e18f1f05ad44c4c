"""The simulator's jobs that fail and are restarted from their checkpoints, and ``trainpulse eval``'s job-life rows.

torchrun says it restarts the worker group after its report of the dead worker; the restarted job prints its
checkpoint's load before its first step, resumes at the last saved step, and the fault that killed the rank
is spent. The evaluation's truth is the simulator's own record of each attempt.
"""

from __future__ import annotations

import pytest

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.collect.sim.lives import LIVES, RESTARTED_JOB
from trainpulse_otel.evaluation.job_life import evaluate_lives, format_lives, truth
from trainpulse_otel.logs.lines import LogLine
from trainpulse_otel.logs.reader import LogReader
from trainpulse_otel.runtime import discover
from trainpulse_otel.samples import CHECKPOINT_LOADED, PROCESS_FAILED, WORKERS_RESTARTED, LogEvent

START = 1764400000.0


def lived(name: str, seed: int = 0) -> tuple[SimulatedNode, list[tuple[float, LogEvent]]]:
    scenario = LIVES[name]
    node = SimulatedNode(scenario, seed=seed)
    events = []
    for t in range(int(scenario.duration_s)):
        events += [(float(t), e) for e in node.sample(float(t)).events or ()]
    return node, events


def test_torchrun_restarts_the_job_which_loads_its_checkpoint_and_does_the_steps_since_again():
    node, events = lived("restart_from_checkpoint")
    kinds = [e.kind for _, e in events]
    assert kinds == [PROCESS_FAILED, PROCESS_FAILED, WORKERS_RESTARTED, CHECKPOINT_LOADED]
    died, restarted = events[0][1].ts, events[2][1]
    assert restarted.ts >= events[1][1].ts and restarted.details["remaining"] == 3  # after the agent's report
    first, second = node.attempts
    assert first[-1][1] == pytest.approx(died - 1.0)  # the last step before rank 1 raised
    loaded = events[3][1]
    assert loaded.details == {"duration_s": RESTARTED_JOB["checkpoint_load_s"]} and loaded.ts < second[0][1]
    assert second[0][1] - first[-1][1] == pytest.approx(RESTARTED_JOB["restart_after_s"] + 1.0)
    assert first[0][0] < second[0][0] < first[-1][0]  # resumed at the last save, past the first step
    assert second[-1][0] > first[-1][0]  # and went on: the fault is spent


def test_a_job_that_dies_before_its_first_save_starts_again_from_where_it_began():
    node, _ = lived("restart_before_first_checkpoint")
    first, second = node.attempts
    assert second[0][0] == first[0][0]


def test_the_restart_and_load_lines_are_what_the_log_reader_makes_of_them():
    _, events = lived("restarted_twice")
    told = [e for _, e in events if e.kind in (WORKERS_RESTARTED, CHECKPOINT_LOADED)]
    assert [e.kind for e in told] == [WORKERS_RESTARTED, CHECKPOINT_LOADED] * 2
    for e in told:
        reader = LogReader()
        read = reader.feed(LogLine(e.message, source=e.source, node=e.hostname, ts=e.ts)) + reader.flush()
        (x,) = [x for x in read if isinstance(x, LogEvent)]
        assert x.kind == e.kind and x.details == e.details


def test_the_truth_of_a_restart_is_read_from_the_attempts_reports():
    ended = [(100, 0.0), (110, 10.0), (120, 20.0), (130, 30.0)]
    new = [(116, 70.0), (117, 71.0)]  # resumed from step 115: the ended attempt passed it at 10 s, last at 30 s
    got = truth([ended, new], LIVES["restart_from_checkpoint"])
    assert got == {"lost_progress": 20.0, "restart": 28.0, "checkpoint_load": 12.0}


def test_eval_s_job_life_rows_are_right_on_every_life_and_goodput_adds_up():
    lives = evaluate_lives(seeds=1, plugins=discover(autoload=False))
    assert [r.scenario for r in lives] == list(LIVES)
    for r in lives:
        assert r.ok, (r, format_lives(lives))
        assert r.attempts == r.attempts_found >= 2 and r.goodput_gap == 0.0
        wall = LIVES[r.scenario].duration_s
        lost = sum(r.found_s.values())
        assert r.ettr is not None and r.ettr <= 1.0 - lost / wall  # ETTR pays for every restart
