"""A hanging action against the tick: tick durations of a simulated engine with no actions, and while a command
action that sleeps 60 s hangs to its 30 s timeout; and what deciding costs a tick.

Two engines (``throughput_collapse`` from 40 s, 20 s of virtual-time warm-up), ticked in virtual time, one tick a
virtual second: the first without actions, the second with ``{"on": {"signal": "*"}, "run": [sleep 60]}``. Once
the fault is raised (the action queued and started), each is ticked for 3 s of wall time; prints ticks done and the
median, p99 and max tick. Then the decision itself: ``ActionPolicy.decide`` over a tick that raises one signal,
with 4 actions (median of 20,000).

    python bench/actions.py
"""

from __future__ import annotations

import statistics
import sys
import time

from trainpulse_otel.actions import ActionPolicy
from trainpulse_otel.config import Settings
from trainpulse_otel.config_values import actions
from trainpulse_otel.diagnose import Diagnosis, PipelineResult, Signal, Transition
from trainpulse_otel.runtime import open_engine, warm_up

T0 = 1_764_400_000.0
HANG = [sys.executable, "-c", "import time; time.sleep(60)"]


def ticks_while_hanging(entries: list[dict]) -> list[float]:
    settings = Settings(mode="sim", scenario="throughput_collapse", onset=40.0, warmup=20.0, actions=actions(entries))
    engine = open_engine(settings, clock=lambda: T0, actions=True)
    try:
        warm_up(engine)
        ts, raised = T0, False
        while not raised:
            ts += 1.0
            raised = any(t.event == "raised" for t in engine.tick(ts).transitions)
        time.sleep(0.5)  # the action's process has started and hangs
        took, until = [], time.monotonic() + 3.0
        while time.monotonic() < until:
            started = time.perf_counter()
            ts += 1.0
            engine.tick(ts)
            took.append(time.perf_counter() - started)
        return took
    finally:
        engine.close()


def decide_cost() -> float:
    policy = ActionPolicy(actions([{"on": {"signal": s}, "run": ["true"]} for s in ("*", "a", "b", "c")]))
    signal = Signal("rank_straggler", "warning", T0, "rank 5 is slow", {"rank": 5})
    result = PipelineResult(
        Diagnosis(T0, signals=(signal,)), (Transition(T0, "raised", signal.name, "warning", signal.subject),)
    )
    runs = []
    for i in range(20_000):
        started = time.perf_counter()
        policy.decide(result, T0 + i * 1000.0)  # past the cooldown each time: a run decided
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def show(name: str, took: list[float]) -> None:
    ms = sorted(t * 1e3 for t in took)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    print(
        f"{name:<34} {len(ms):>6} ticks  median {statistics.median(ms):6.2f} ms  p99 {p99:6.2f} ms  max {ms[-1]:6.2f} ms"
    )


if __name__ == "__main__":
    show("no actions", ticks_while_hanging([]))
    show("an action hanging (sleep 60, 30s)", ticks_while_hanging([{"on": {"signal": "*"}, "run": HANG}]))
    print(f"ActionPolicy.decide, one raise, 4 actions: {decide_cost() * 1e6:.1f} µs")
