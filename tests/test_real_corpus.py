"""The regression corpus: traces of real gloo jobs, replayed as ``trainpulse replay`` does, to today's diagnosis.

``tests/fixtures/corpus/NAME.jsonl`` are rank 0's traces of real multi-process
gloo DDP jobs on CPU (``tests/integrations/monitor/gloo_job.py --record``; how
each was recorded and what happened in it: the README beside them). Each is
replayed through the CLI's path (settings, :func:`read_trace`,
:func:`open_replay`, :func:`replay`) and its outcome — the timeline of
signals, the top root cause over time, the final health, signals, root causes
and goodput — must equal ``NAME.expected.json``. A change that alters one
shows up as a diff: rewrite the files with

    python -m tests.test_real_corpus --update

and say in the commit which outcome changed and why. The tests at the end
state each run's story in plain code (the straggler is rank 2 and the top
cause, the hang names rank 3 …), so an update cannot quietly rewrite it.

The traces are real recordings: never edit them by hand or regenerate them
from the simulator; record a new one (README) instead.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from trainpulse_otel.collect.trace import TraceRecord, bounded_lines, read_trace
from trainpulse_otel.config import load_settings
from trainpulse_otel.runtime import open_replay
from trainpulse_otel.runtime.replay import replay

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CASES = ("healthy", "straggler", "checkpoint", "hang", "nan")
#: Below the monitor's 0.25 s (1 s for healthy): a tick's lines share one ``ts``, so each recorded tick replays
#: as its own; at 250 ms the ticks' jitter would merge some pairs (a trace without host lines has nothing else
#: to tell one tick from the next).
REPLAY_INTERVAL = "100ms"

# What each run did, from the harness's own log (README): the step at which the fault began.
STRAGGLER_RANK, STRAGGLER_FROM_STEP = 2, 123
HANG_RANK, HANG_FROM_STEP, HANG_S = 3, 47, 40.0
DIVERGE_FROM_STEP = 325
#: The wall time of rank 0's 34 saves (torch.save + fsync), as it measured them.
CHECKPOINT_SAVES_S = 8.074


def trace_path(name: str) -> Path:
    return CORPUS / f"{name}.jsonl"


def expected_path(name: str) -> Path:
    return CORPUS / f"{name}.expected.json"


def _subject(subject: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(subject.items()))


@functools.cache
def outcome(name: str) -> dict[str, Any]:
    """Replay one trace as ``trainpulse replay FILE -json -interval 100ms`` does; its outcome, rounded."""
    settings = load_settings(flags={"interval": REPLAY_INTERVAL}, environ={})  # defaults: no TRAINPULSE_* leaks in
    errors: list = []
    with trace_path(name).open("rb") as fh:
        records = list(read_trace(bounded_lines(fh), errors))
    start = records[0].ts
    steps = _StepAt(records)
    tops: list[dict[str, Any]] = []
    last_top: tuple = (None, {})  # nothing blamed before the first tick

    def on_result(step: Any) -> None:
        nonlocal last_top
        causes = step.diagnosis.to_dict()["root_causes"]
        top = (causes[0]["cause"], _subject(causes[0].get("subject") or {})) if causes else (None, {})
        if top != last_top:
            ts = step.diagnosis.ts
            tops.append({"t": round(ts - start, 2), "step": steps.at(ts), "cause": top[0], "subject": top[1]})
            last_top = top

    result = replay(records, open_replay(settings), interval_s=settings.interval, errors=errors, on_result=on_result)
    replayed = result.to_dict()
    diagnosis = replayed["diagnosis"]
    goodput = diagnosis["goodput"] or {}
    return {
        "trace": f"{name}.jsonl",
        "replay": f"trainpulse replay {name}.jsonl -json -interval {REPLAY_INTERVAL}",
        "lines": len(records),
        "bad_lines": [str(e) for e in errors],
        "ticks": result.ticks,
        "timeline": [
            {
                "t": round(e["ts"] - start, 2),
                "step": steps.at(e["ts"]),
                "event": e["event"],
                "signal": e["signal"],
                "severity": e["severity"],
                "subject": _subject(e["subject"]),
            }
            for e in replayed["timeline"]
        ],
        "top_cause": tops,
        "final": {
            "health": {"status": diagnosis["health"]["status"], "score": round(diagnosis["health"]["score"], 1)},
            "signals": [
                {"name": s["name"], "severity": s["severity"], "subject": _subject(s["subject"])}
                for s in diagnosis["signals"]
            ],
            "root_causes": [
                {
                    "cause": c["cause"],
                    "subject": _subject(c.get("subject") or {}),
                    "confidence": round(c["confidence"], 2),
                }
                for c in diagnosis["root_causes"]
            ],
            "goodput": {
                "ratio": None if goodput.get("ratio") is None else round(goodput["ratio"], 2),
                "badput_s": {k: round(v, 1) for k, v in sorted((goodput.get("badput_s") or {}).items())},
            },
        },
    }


class _StepAt:
    """The job's ``global_step`` as last reported at a time of the trace (what the reader sees beside an event)."""

    def __init__(self, records: list[TraceRecord]) -> None:
        reports = [(r.ts, r.payload.global_step) for r in records if r.kind == "training"]
        reports = [(ts, step) for ts, step in reports if step is not None]  # heartbeats alone carry none
        self._ts = [ts for ts, _ in reports]
        self._steps = [step for _, step in reports]

    def at(self, ts: float) -> int | None:
        i = bisect.bisect_right(self._ts, ts)
        return self._steps[i - 1] if i else None


def expected(name: str) -> dict[str, Any]:
    return json.loads(expected_path(name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ the frozen outcomes


@pytest.mark.parametrize("name", CASES)
def test_the_replay_is_today_s_diagnosis(name):
    got = outcome(name)
    assert got["bad_lines"] == []
    want = expected(name)
    hint = f"{name}: the diagnosis of a real run changed; if meant, `python -m tests.test_real_corpus --update`"
    for key in ("lines", "ticks", "timeline", "top_cause"):
        assert got[key] == want[key], f"{hint} ({key})"
    assert got["final"] == want["final"], hint
    assert got == want, hint


@pytest.mark.parametrize("name", CASES)
def test_the_traces_are_small_plain_jsonl(name):
    path = trace_path(name)
    assert path.stat().st_size < 300_000
    assert all(line.startswith('{"ts":') for line in path.read_text(encoding="utf-8").splitlines())


# ------------------------------------------------------------------ each run's story


def raised(name: str, signal: str | None = None) -> list[dict[str, Any]]:
    return [e for e in outcome(name)["timeline"] if e["event"] == "raised" and signal in (None, e["signal"])]


def test_healthy_two_ranks_raise_nothing_and_stay_healthy():
    assert raised("healthy") == []
    final = outcome("healthy")["final"]
    assert final["health"] == {"status": "healthy", "score": 100.0}
    assert final["signals"] == [] and final["root_causes"] == []


def test_straggler_rank_2_is_raised_after_it_slows_and_is_the_top_cause():
    stragglers = raised("straggler", "rank_straggler")
    assert stragglers and {e["subject"]["rank"] for e in stragglers} == {STRAGGLER_RANK}
    assert min(e["step"] for e in stragglers) >= STRAGGLER_FROM_STEP  # no rank raised before it slowed
    final = outcome("straggler")["final"]
    assert [s["subject"]["rank"] for s in final["signals"] if s["name"] == "rank_straggler"] == [STRAGGLER_RANK]
    top = final["root_causes"][0]
    assert top["cause"] == "straggler_rank" and top["subject"]["rank"] == STRAGGLER_RANK
    assert max(final["goodput"]["badput_s"], key=final["goodput"]["badput_s"].get) == "straggler_rank"


def test_checkpoint_saves_are_the_top_cause_and_their_badput_is_what_they_took():
    assert [e["signal"] for e in raised("checkpoint", "checkpoint_stall")] == ["checkpoint_stall"]
    final = outcome("checkpoint")["final"]
    assert final["root_causes"][0]["cause"] == "checkpoint_io_bound"
    assert final["goodput"]["badput_s"]["checkpoint_io_bound"] == pytest.approx(CHECKPOINT_SAVES_S, rel=0.10)


def test_hang_rank_3_is_named_as_rank_hang_while_training_stalls_and_cleared_after():
    stalled, *escalated = raised("hang", "training_stalled")  # plain evidence: raised at once, critical a tick on
    assert stalled["step"] == HANG_FROM_STEP  # no step completed from the block to the signal
    assert [e["severity"] for e in escalated] in ([], ["critical"])
    (cleared,) = [e for e in outcome("hang")["timeline"] if e["event"] == "cleared"]
    assert cleared["signal"] == "training_stalled" and cleared["step"] > HANG_FROM_STEP
    assert [e["signal"] for e in raised("hang") if e["signal"] != "training_stalled"] == []  # nothing else
    hangs = [c for c in outcome("hang")["top_cause"] if c["cause"] == "rank_hang"]
    assert hangs and hangs[0]["subject"]["rank"] == HANG_RANK and hangs[0]["subject"]["phase"] == "compute"
    assert stalled["t"] <= hangs[0]["t"] < cleared["t"]
    assert outcome("hang")["final"]["goodput"]["badput_s"]["rank_hang"] >= 0.75 * HANG_S


def test_nan_the_diverged_loss_is_nonfinite_loss_and_numerical_instability():
    nonfinite = raised("nan", "nonfinite_loss")
    assert nonfinite and min(e["step"] for e in nonfinite) > DIVERGE_FROM_STEP  # the loss was finite before
    assert {e["signal"] for e in raised("nan")} == {"nonfinite_loss"}
    final = outcome("nan")["final"]
    assert [(s["name"], s["severity"]) for s in final["signals"]] == [("nonfinite_loss", "critical")]
    assert final["root_causes"][0]["cause"] == "numerical_instability"


@functools.cache
def final_goodput(name: str) -> tuple[Any, float, float]:
    """The replay's final goodput block, the first training report's time and the last step report's."""
    settings = load_settings(flags={"interval": REPLAY_INTERVAL}, environ={})
    with trace_path(name).open("rb") as fh:
        records = list(read_trace(bounded_lines(fh), []))
    first = next(r.ts for r in records if r.kind == "training")  # rank 0's first heartbeat, before any step
    last = [r.ts for r in records if r.kind == "training" and r.payload.step_time_ms is not None][-1]
    diagnosis = replay(records, open_replay(settings), interval_s=settings.interval).diagnosis
    return diagnosis.goodput, first, last


@pytest.mark.parametrize("name", CASES)
def test_the_badput_adds_up_to_the_time_not_productive(name):
    # the contract: badput by cause, unattributed included, sums to (1 - ratio) x the wall time since the first
    # report, within 1 % (the block's wall time is to the tick that saw the last report: within a tick of it)
    goodput, first, last = final_goodput(name)
    badput, lost = sum(goodput.badput_s.values()), 1.0 - goodput.ratio
    assert badput == pytest.approx(lost * goodput.wall_s, rel=1e-9)
    assert badput == pytest.approx(lost * (last - first), abs=0.01 * (last - first))
    assert goodput.wall_s == pytest.approx(last - first, abs=0.2)


# ------------------------------------------------------------------ regenerating the expectations


def main() -> None:
    p = argparse.ArgumentParser(description="Replay the corpus; --update rewrites each NAME.expected.json.")
    p.add_argument("--update", action="store_true", help="write today's outcomes as the expectations")
    p.add_argument("names", nargs="*", default=list(CASES), help=f"traces to replay (default: {' '.join(CASES)})")
    args = p.parse_args()
    for name in args.names:
        got = outcome(name)
        path = expected_path(name)
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        state = "unchanged" if got == old else ("changed" if old is not None else "new")
        if args.update and got != old:
            path.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
        print(f"{name}: {state}{' (written)' if args.update and got != old else ''}")


if __name__ == "__main__":
    main()
