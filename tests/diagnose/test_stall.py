"""``training_stalled`` and ``rank_hang``: a hung rank named from heartbeats or GPUs, or honestly unknown."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from tests import parts
from tests.diagnose.builders import T0, Harness, job
from tests.diagnose.frames import heartbeat_frame
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.collect.trace import TraceRecord
from trainpulse_otel.diagnose import VOCABULARY
from trainpulse_otel.diagnose.correlate import Evidence
from trainpulse_otel.diagnose.detectors.stall import TrainingStalled
from trainpulse_otel.diagnose.goodput import GoodputAccount
from trainpulse_otel.diagnose.rootcause.hang import rank_hang
from trainpulse_otel.diagnose.rootcause.ranking import Candidate, rank_candidates
from trainpulse_otel.diagnose.tick import NodeState
from trainpulse_otel.diagnose.types import CRITICAL, RootCause, Signal
from trainpulse_otel.evaluation.sim_replay import START_TS, replay_sim, sim_records
from trainpulse_otel.runtime.replay import ReplayResult
from trainpulse_otel.samples import WATCHDOG_TIMEOUT, Frame, LogEvent, RankSample, TrainingSample

ONSET, RESUME, HUNG_S = 90.0, 270.0, 180.0


@cache
def replayed(name: str, seconds: float = 300.0) -> ReplayResult:
    """The scenario replayed past the resume (the eval judges it before, while it is stalled)."""
    return replay_sim(sim_records(SCENARIOS[name], 0, seconds), 1.0, parts.builtins())


def transitions(result: ReplayResult, event: str, signal: str = "training_stalled") -> list[float]:
    return [t.ts - START_TS for t in result.timeline if t.event == event and t.signal == signal]


def stalled_signal(name: str) -> dict:
    """The training_stalled signal and top cause in the diagnosis 60 s into the hang."""
    diagnosis = replay_sim(sim_records(SCENARIOS[name], 0, ONSET + 60), 1.0, parts.builtins()).diagnosis.to_dict()
    (signal,) = [s for s in diagnosis["signals"] if s["name"] == "training_stalled"]
    return {"signal": signal, "top": diagnosis["root_causes"][0], "goodput": diagnosis["goodput"]}


def test_a_hung_rank_with_heartbeats_is_named_with_its_phase_gpu_host_and_pid():
    got = stalled_signal("training_stalled")
    signal, top = got["signal"], got["top"]
    assert signal["severity"] == "critical" and signal["subject"] == {}
    evidence = signal["evidence"]
    assert evidence["inferred_from"] == "heartbeats" and evidence["threshold_s"] == 15.0 and evidence["peers_waiting"]
    (lagging,) = evidence["lagging"]
    assert (lagging["rank"], lagging["gpu_index"], lagging["hostname"], lagging["phase"]) == (3, 3, "node-000", "data")
    assert 59 <= lagging["phase_age_s"] <= 61 and lagging["pid"] == 41003
    assert (evidence["waiting_phase"], evidence["waiting_ranks"]) == ("all_reduce", 7)
    assert "rank 3 (GPU 3) is in data" in signal["message"]
    assert top["cause"] == "rank_hang" and top["signals"] == ["training_stalled"]
    assert top["subject"] == {"rank": 3, "gpu_index": 3, "hostname": "node-000", "phase": "data"}
    for words in (
        "py-spy dump --pid 41003",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "torchfrtrace",
    ):
        assert words in top["remediation"]
    assert "last checkpoint" in top["remediation"] and "drain" in top["remediation"]


def test_without_heartbeats_the_idle_gpu_among_spinning_peers_names_the_rank():
    got = stalled_signal("training_stalled_no_heartbeat")
    evidence, top = got["signal"]["evidence"], got["top"]
    assert evidence["inferred_from"] == "gpus" and evidence["waiting_gpus"] == 7
    assert [(e["rank"], e["gpu_index"]) for e in evidence["lagging"]] == [(3, 3)]
    assert top["cause"] == "rank_hang" and top["subject"] == {"rank": 3, "gpu_index": 3, "hostname": "node-000"}
    assert "py-spy dump --pid <pid of rank 3>" in top["remediation"]


def test_raised_15_s_into_the_hang_with_peers_seen_waiting_30_s_without_and_cleared_soon_after_the_resume():
    for name, after in (("training_stalled", 15), ("training_stalled_no_heartbeat", 30)):
        result = replayed(name)
        raised, *escalated = transitions(result, "raised")  # plain evidence raises it at once, critical a tick on
        (cleared,) = transitions(result, "cleared")
        assert ONSET + after - 2 <= raised <= ONSET + after + (0 if escalated else 3), (name, raised)
        assert escalated in ([], [raised + 1.0]) and RESUME < cleared <= RESUME + 4, (name, escalated, cleared)
        assert {t.signal for t in result.timeline if t.event == "raised"} == {"training_stalled"}


def test_the_hang_is_rank_hang_badput_not_a_wait_or_compute():
    badput = replayed("training_stalled").diagnosis.goodput.badput_s
    assert HUNG_S - 5 <= badput["rank_hang"] <= HUNG_S + 5, badput
    others = {cause: s for cause, s in badput.items() if cause != "rank_hang"}
    assert sum(others.values()) < 10, others  # nothing left to unattributed, communication_bound, …
    live = stalled_signal("training_stalled")["goodput"]["badput_s"]
    assert 55 <= live["rank_hang"] <= 62  # counted while it lasts, from the last step on


# ------------------------------------------------------------------ hand-built frames


def stalled_run(frames: list[Frame]) -> Harness:
    return Harness(TrainingStalled()).feed(frames)


def test_a_reported_checkpoint_phase_of_any_length_is_no_stall():
    healthy = [job(float(t)) for t in range(60)]
    saving = [heartbeat_frame(float(t), 24059, {0: "checkpoint"}, 60.0) for t in range(60, 200)]
    assert stalled_run(healthy + saving).raised() == []


def test_a_job_resumed_from_an_earlier_checkpoint_steps_again_and_is_no_stall():
    before = [job(float(t)) for t in range(60)]  # steps 24000-24059
    redone = [job(float(t), training={"global_step": 24000 + t - 60}) for t in range(60, 200)]  # again from 24000
    assert stalled_run(before + redone).raised() == []


def test_a_job_whose_ranks_all_went_idle_has_ended_not_stalled():
    healthy = [job(float(t)) for t in range(60)]
    done = [heartbeat_frame(float(t), 24059, dict.fromkeys(range(8), "idle"), 60.0) for t in range(60, 200)]
    assert stalled_run(healthy + done).raised() == []


def test_every_rank_inside_the_collective_is_a_stall_with_the_rank_unknown():
    healthy = [job(float(t)) for t in range(60)]
    stuck = [heartbeat_frame(float(t), 24059, {}, 60.0) for t in range(60, 100)]
    harness = stalled_run(healthy + stuck)
    assert 89 <= harness.first_raise_s("training_stalled") <= 92
    (signal,) = harness.active()
    assert signal.evidence["lagging"] == [] and signal.evidence["waiting_phase"] == "all_reduce"
    assert "which rank is stuck is unknown: every rank waits in all_reduce" in signal.message


def test_the_rank_behind_in_global_step_is_the_one_named():
    healthy = [job(float(t)) for t in range(60)]
    frames = []
    for t in range(60, 100):
        frame = heartbeat_frame(float(t), 24060, {}, 60.0)
        ranks = tuple(
            replace(r, global_step=24059, phase="compute") if r.rank == 6 else r for r in frame.training.ranks
        )
        frames.append(replace(frame, training=replace(frame.training, ranks=ranks)))
    (signal,) = stalled_run(healthy + frames).active()
    assert [(e["rank"], e["global_step"]) for e in signal.evidence["lagging"]] == [(6, 24059)]


def test_without_heartbeats_or_busy_gpus_a_silent_job_is_not_judged_stalled():
    healthy = [job(float(t)) for t in range(60)]
    idle = {"utilization_percent": 0.0, "power_watts": 70.0}
    quiet = [job(float(t), training={"global_step": 24059, "timestamp": T0}, gpu_changes=idle) for t in range(60, 200)]
    assert stalled_run(healthy + quiet).raised() == []


def test_the_threshold_is_ten_median_steps_when_steps_are_long():
    def slow(t: float, step: int) -> Frame:
        return job(t, training={"global_step": step, "timestamp": T0 + t, "step_time_ms": 5000.0})

    steps = [slow(float(t), 24000 + t // 5) for t in range(300)]  # a step every 5 s
    frozen = [slow(float(t), 24059) for t in range(300, 400)]  # the same report: no step completes
    harness = stalled_run(steps + frozen)
    assert 343 <= harness.first_raise_s("training_stalled") <= 348  # 50 s after the last step at 295 s
    (signal,) = harness.active()
    assert signal.evidence["threshold_s"] == 50.0


def test_heartbeat_only_reports_are_no_progress_and_a_new_step_anywhere_is():
    detector = TrainingStalled()
    frames = [job(float(t)) for t in range(30)]
    beats = TrainingSample(
        ranks=tuple(RankSample(rank=r, global_step=24029, phase="all_reduce", phase_since=T0 + 30) for r in range(8))
    )
    frames += [Frame(ts=T0 + t, gpus=frames[0].gpus, training=beats) for t in range(30, 80)]
    harness = Harness(detector).feed(frames)
    assert 59 <= harness.first_raise_s("training_stalled") <= 62
    moved = replace(beats, ranks=tuple(replace(r, global_step=24030) for r in beats.ranks))
    harness.feed(Frame(ts=T0 + t, gpus=frames[0].gpus, training=moved) for t in range(80, 90))
    assert harness.cleared("training_stalled") and detector.stalled_s < 10


def test_a_healthy_job_with_heartbeats_and_its_routine_save_raises_nothing():
    healthy = replace(SCENARIOS["healthy"], job={"heartbeats": True})
    result = replay_sim(sim_records(healthy, 0, 1260), 1.0, parts.builtins())  # the routine save is at 20 min
    assert result.timeline == [] and result.diagnosis.goodput.badput_s.get("rank_hang") is None


# ------------------------------------------------------------------ ranking


def test_a_deeper_cause_that_explains_the_stall_outranks_rank_hang_and_takes_its_badput():
    """What the failing-GPU cause does: it lists training_stalled in ``explains``, so it claims the stall."""
    stall = Signal("training_stalled", CRITICAL, T0, "no training step has completed for 40 s", {}, {"lagging": []})
    fault = Signal("gpu_fault", CRITICAL, T0, "GPU 4 fell off the bus", {"gpu_index": 4})
    hang = rank_hang(Evidence((stall, fault), {}, NodeState(), T0))[0]
    deeper = Candidate("gpu_failure", 0.75, "GPU 4 failed", "replace it", [fault], [stall], {"gpu_index": 4})
    assert "stall" in deeper.claims(VOCABULARY) and hang.claims(VOCABULARY) == {"stall"}
    ranked = rank_candidates([hang, deeper], VOCABULARY, {"stall": 0.3, "compute": 0.01})
    assert [c.cause for c in ranked] == ["gpu_failure", "rank_hang"]
    assert ranked[0].confidence > 0.9 and ranked[1].confidence <= ranked[0].confidence - 0.1
    account = GoodputAccount()
    account.add(T0, TrainingSample(global_step=1, step_time_ms=1000.0), None, 1000.0, (), False)
    account.stall(T0 + 40)
    account.attribute_stall([RootCause(c.cause, c.confidence, c.summary, ("training_stalled",)) for c in ranked])
    assert account.badput_s == {"gpu_failure": 40.0}


def test_a_burst_of_disk_writes_during_a_hang_without_heartbeats_neither_clears_nor_restarts_it():
    """Seed 2 of the no-heartbeat hang once cleared 73 s in: one tick of 3x writes restarted the stall clock."""
    for seed in range(4):
        result = replay_sim(sim_records(SCENARIOS["training_stalled_no_heartbeat"], seed, 265), 1.0, parts.builtins())
        assert len(transitions(result, "raised")) == 1 and transitions(result, "cleared") == [], seed


def test_several_stuck_ranks_are_one_cause_with_lists_and_an_unknown_rank_is_said_plainly():
    lagging = [
        {"rank": 9, "phase": "data", "gpu_index": 1, "hostname": "node-001", "pid": 7},
        {"rank": 12, "phase": "data", "gpu_index": 4, "hostname": "node-001", "pid": 8},
    ]
    stall = Signal(
        "training_stalled", CRITICAL, T0, "no training step has completed for 45 s", {}, {"lagging": lagging}
    )
    (several,) = rank_hang(Evidence((stall,), {}, NodeState(), T0))
    assert several.subject == {"ranks": [9, 12], "gpu_indices": [1, 4], "hostname": ["node-001"], "phase": "data"}
    assert "wait for them" in several.summary and "py-spy dump --pid 7" in several.remediation
    unknown = replace(stall, evidence={"lagging": [], "inferred_from": None})
    (cause,) = rank_hang(Evidence((unknown,), {}, NodeState(), T0))
    assert cause.subject == {} and "The stuck rank is unknown" in cause.summary
    assert "py-spy dump --pid" in cause.remediation and "every rank's process" in cause.remediation


def test_the_waits_of_the_step_that_sat_out_a_stall_are_no_sync_imbalance():
    """After a real hang the gathered sync waits of the waiting ranks hold the whole stall (60 s) for a few
    reports while the job's steps are fast again: a stall, not imbalance (seen on the 4-process gloo run)."""
    from trainpulse_otel.diagnose.detectors.comms import SyncImbalance

    def frame(t: float) -> Frame:
        base = job(t)
        if not 60 <= t < 66:
            return base
        held = tuple(replace(r, sync_wait_ms=5.0 if r.rank == 3 else 60_000.0) for r in base.training.ranks)
        return replace(base, training=replace(base.training, ranks=held))

    assert Harness(SyncImbalance()).run(range(120), frame).raised() == []


def test_without_ranks_or_power_readings_a_one_rank_per_gpu_job_is_taken_to_run_rank_i_on_gpu_i():
    def frame(t: float) -> Frame:
        stuck = t >= 60
        return job(
            t,
            training={"global_step": 24059 if stuck else 24000 + int(t), "timestamp": T0 + min(t, 59), "ranks": ()},
            gpu_changes={"utilization_percent": 100.0, "power_watts": None} if stuck else None,
            gpus={3: {"utilization_percent": 0.0}} if stuck else None,
        )

    (signal,) = stalled_run([frame(float(t)) for t in range(100)]).active()
    (entry,) = signal.evidence["lagging"]
    assert (entry["gpu_index"], entry["rank"], entry["rank_assumed"]) == (3, 3, True)
    assert signal.evidence["inferred_from"] == "gpus"


def test_the_others_watchdog_lines_beside_the_heartbeats_are_one_rank_hang_of_the_rank_they_name():
    """Logs and telemetry meet: the heartbeats put rank 3 in ``data`` while the others wait; the others' NCCL
    watchdogs then time out (their lines, shipped or followed). One ``rank_hang`` of rank 3 explains both."""
    at = START_TS + ONSET + 45

    def records():
        for record in sim_records(SCENARIOS["training_stalled"], 0, ONSET + 60):
            if record.kind == "training" and record.ts == at:
                for rank in (0, 1, 2, 4, 5, 6, 7):
                    line = f"[rank{rank}]:[E] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(…)"
                    details = {"op": "ALLREDUCE", "seq": 24000, "timeout_ms": 30000, "pg_rank": rank}
                    event = LogEvent(
                        at, WATCHDOG_TIMEOUT, line, rank, source=f"rank{rank}.log", line=9, details=details
                    )
                    yield TraceRecord(0, at, "event", event)
            yield record

    diagnosis = replay_sim(records(), 1.0, parts.builtins()).diagnosis.to_dict()
    hangs = [c for c in diagnosis["root_causes"] if c["cause"] == "rank_hang"]
    assert len(hangs) == 1
    assert hangs[0]["subject"]["rank"] == 3 and hangs[0]["subject"]["phase"] == "data"
    assert {"training_stalled", "collective_timeout"} <= set(hangs[0]["signals"])
    assert diagnosis["root_causes"][0]["cause"] == "rank_hang"
