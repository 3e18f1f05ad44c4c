"""Record → replay reproduces the daemon's frames; bad trace lines are reported and skipped."""

import gc
import json

import pytest

from tests import parts
from tests.recording import recording_engine, training_report
from trainpulse_otel.collect.trace import TraceError, read_trace
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime.gc_pacing import YOUNG_THRESHOLD, rare_cycle_collection
from trainpulse_otel.runtime.replay import group_ticks, replay
from trainpulse_otel.samples import HostSample, RankSample, TrainingSample


def _record(tmp_path, ticks=40):
    path = tmp_path / "trace.jsonl"
    clock = [1_764_400_000.0]
    engine = recording_engine(path, clock, history_size=1000)
    frames = []  # each tick's whole frame (the window keeps older ones as their history record)
    for i in range(ticks):
        if i % 3 == 0:  # training reports arrive every third tick, between ticks
            engine.ingest(training_report(i))
        engine.tick()
        frames.append(engine.window.latest)
        clock[0] += 1.0
    engine.close()
    return path, frames


def test_replay_reproduces_the_live_frames_exactly(tmp_path):
    path, live = _record(tmp_path)
    stepper = parts.stepper(history_size=1000)
    replayed = []
    with open(path, "rb") as fh:
        result = replay(read_trace(fh, []), stepper, on_result=lambda _: replayed.append(stepper.window.latest))
    assert result.ticks == len(live) == 40
    assert replayed == live


def test_replay_collects_cycles_rarely_and_leaves_the_callers_thresholds_as_they_were(tmp_path):
    path, _ = _record(tmp_path, ticks=5)
    before = gc.get_threshold()
    seen = []
    with open(path, "rb") as fh:
        replay(read_trace(fh, []), parts.stepper(), on_result=lambda _: seen.append(gc.get_threshold()))
    assert seen and all(t[0] == YOUNG_THRESHOLD and t[1:] == before[1:] for t in seen)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), rare_cycle_collection():
        raise RuntimeError("a replay that fails")
    assert gc.get_threshold() == before


def test_training_is_recorded_only_when_new(tmp_path):
    path, _ = _record(tmp_path, ticks=9)
    kinds = [
        next(k for k in ("gpus", "host", "training") if k in json.loads(line)) for line in path.read_text().splitlines()
    ]
    assert kinds.count("gpus") == 9 and kinds.count("training") == 3


def test_malformed_lines_are_reported_with_their_number_and_skipped(tmp_path):
    path, _live = _record(tmp_path, ticks=5)
    lines = path.read_text().splitlines()
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"ts": 5, "gpus": [{"index": 0}], "host": {}}))
    lines.insert(6, json.dumps({"ts": "yesterday", "host": {}}))
    lines.insert(8, json.dumps({"ts": 1, "training": {"step_time_ms": -4}}))
    raw = [ln.encode() for ln in lines] + [b"\xff\xfe broken utf-8"]
    errors: list[TraceError] = []
    result = replay(read_trace(raw, errors), parts.stepper(), errors=errors)
    assert [e.lineno for e in errors] == [3, 5, 7, 9, len(raw)]
    assert "training.step_time_ms" in str(errors[3])
    assert result.ticks == 5


def test_grouping_follows_the_daemon_cadence():
    from trainpulse_otel.collect.trace import TraceRecord

    recs = [
        TraceRecord(1, 10.0, "gpus", ()),
        TraceRecord(2, 10.0, "host", HostSample()),
        TraceRecord(3, 10.3, "training", TrainingSample(step_time_ms=1)),
        TraceRecord(4, 10.6, "training", TrainingSample(step_time_ms=2)),
        TraceRecord(5, 10.9, "gpus", ()),  # second GPU reading: new tick
        TraceRecord(6, 12.5, "training", TrainingSample(step_time_ms=3)),
    ]  # > interval later: new tick
    assert [[r.lineno for r in g] for g in group_ticks(recs, 1.0)] == [[1, 2, 3, 4], [5], [6]]


def test_replay_json_shape(tmp_path):
    path, _ = _record(tmp_path, ticks=3)
    with open(path, "rb") as fh:
        out = replay(read_trace(fh, []), parts.stepper()).to_dict()
    assert set(out) == {"timeline", "diagnosis"}
    assert set(out["diagnosis"]) == {"health", "signals", "root_causes", "goodput"}


def test_an_oversized_line_is_reported_and_the_next_line_still_read(tmp_path):
    from trainpulse_otel.collect.trace import bounded_lines

    path = tmp_path / "t.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"ts": 1, "host": {"cpu_percent": 1}}\n')
        fh.write(b'{"ts": 2, "host": {"pad": "' + b"x" * 5000 + b'"}}\n')
        fh.write(b'{"ts": 3, "host": {"cpu_percent": 3}}\n')
    errors: list[TraceError] = []
    with open(path, "rb") as fh:
        lines = list(bounded_lines(fh, limit=1000))
    assert len(lines) == 3 and len(lines[1]) == 1001
    records = list(read_trace(lines, errors, max_line_bytes=1000))
    assert [r.ts for r in records] == [1.0, 3.0] and errors[0].lineno == 2


def test_a_recorded_hang_keeps_its_heartbeats_and_replays_to_the_same_stall(tmp_path):
    path = tmp_path / "hang.jsonl"
    clock = [1_764_400_000.0]
    engine = recording_engine(path, clock)
    live = []
    for i in range(80):
        if i < 20:
            engine.ingest(training_report(i))
        else:  # rank 2 stuck in its data loader at step 19, the others inside the all-reduce: heartbeats only
            phases = {r: "data" if r == 2 else "all_reduce" for r in range(4)}
            beats = tuple(
                RankSample(rank=r, global_step=19, phase=p, phase_since=1_764_400_020.0) for r, p in phases.items()
            )
            engine.ingest(TrainingSample(ranks=beats))
        live += [t for t in engine.tick().transitions if t.signal == "training_stalled"]
        clock[0] += 1.0
    engine.close()
    with open(path, "rb") as fh:
        result = replay(read_trace(fh, []), parts.stepper())
    replayed = [t for t in result.timeline if t.signal == "training_stalled"]
    assert [(t.ts, t.event, t.severity) for t in replayed] == [(t.ts, t.event, t.severity) for t in live]
    assert [t.severity for t in live] in (["critical"], ["warning", "critical"])  # raised, then escalated
    (stalled,) = [s for s in result.diagnosis.signals if s.name == "training_stalled"]
    assert [e["rank"] for e in stalled.evidence["lagging"]] == [2]


def test_frames_built_ahead_of_the_pipeline_change_no_result(monkeypatch):
    """Replay builds a batch of frames before diagnosing them; one frame at a time gives the same timeline,
    the same diagnosis after every tick and the same final one (a straggler: signals raise and causes move)."""
    from trainpulse_otel.collect.sim.scenarios import SCENARIOS
    from trainpulse_otel.evaluation.sim_replay import sim_records
    from trainpulse_otel.runtime import replay as replay_module

    def run() -> tuple[dict, list]:
        seen = []
        records = sim_records(SCENARIOS["rank_straggler"], seed=0, duration_s=150)
        result = replay(records, parts.stepper(), on_result=lambda step: seen.append(step.diagnosis.to_dict()))
        return result.to_dict(), seen

    assert 1 < replay_module.FRAMES_AHEAD < 150 // 2  # more than one batch, the last one short
    ahead = run()
    monkeypatch.setattr(replay_module, "FRAMES_AHEAD", 1)
    assert run() == ahead
    assert len(ahead[1]) == 150 and ahead[0]["timeline"]


@pytest.mark.parametrize(
    ("scenario", "ticks"),
    [("collective_timeout", 80), ("network_error", 30), ("out_of_memory", 262), ("rank_crashed", 20)],
)
def test_a_recorded_failure_the_job_printed_replays_to_the_same_timeline(tmp_path, scenario, ticks):
    """A daemon in ``-mode sim -record`` writes what the job printed as ``event`` lines; replay raises and clears
    the same signals at the same times (each fault from 10 s in, so the run stays short)."""
    from trainpulse_otel.collect.sim import SimCollector

    path, clock = tmp_path / "trace.jsonl", [1_764_400_000.0]
    engine = parts.engine(
        Settings(record=str(path)),
        collectors=[SimCollector(scenario, onset_s=10.0)],
        mode="sim",
        clock=lambda: clock[0],
    )
    live = []
    for _ in range(ticks):
        live += engine.tick().transitions
        clock[0] += 1.0
    engine.close()
    with open(path, "rb") as fh:
        lines = [json.loads(line) for line in fh]
    events = [line["event"] for line in lines if "event" in line]
    assert events and all(e["hostname"] == "node-000" and e["message"] for e in events)
    with open(path, "rb") as fh:
        result = replay(read_trace(fh, []), parts.stepper())
    assert [(t.ts, t.event, t.signal) for t in result.timeline] == [(t.ts, t.event, t.signal) for t in live]
    assert scenario in {t.signal for t in live if t.event == "raised"}
