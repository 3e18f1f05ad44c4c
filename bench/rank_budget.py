"""Cost of the per-rank step budgets (``diagnose/rank_budget.py``) against the whole pipeline update.

For 512 and 4,096 ranks, healthy and with a straggler: simulated samples go through the replay path into
frames; then, in the same process, the median per-tick cost of ``DiagnosticPipeline.update`` (which folds
every report into the rank budgets and lists the worst ranks) and of the rank budgets alone on the same
reports (a ``BudgetBuilder`` beside them for the job's budget, not timed). Printed: both medians and their
ratio — the share of a tick the per-rank budgets take. The first 120 ticks (baselines warming up) are not
timed.

    python bench/rank_budget.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose.budget import BudgetBuilder
from trainpulse_otel.diagnose.rank_budget import RankBudgets
from trainpulse_otel.evaluation.sim_replay import Variant, sim_records
from trainpulse_otel.runtime import build_pipeline, discover, open_replay
from trainpulse_otel.runtime.replay import TraceFeed, group_ticks

PLUGINS = discover(autoload=False)
WARMUP_TICKS = 120
TIMED_TICKS = 200


def frames_of(scenario: str, ranks: int) -> list:
    """The frames of a simulated run of ``scenario`` with ``ranks`` ranks."""
    groups = group_ticks(sim_records(SCENARIOS[scenario], 0, WARMUP_TICKS + TIMED_TICKS, Variant("bench", ranks=ranks)))
    stepper = open_replay(Settings(), PLUGINS)
    feed = TraceFeed(stepper.latest)
    frames = []
    for g in groups:
        ts = feed.apply(g)
        stepper.latest.expire(ts)
        frames.append(stepper.frames.read(ts))
    return frames


def pipeline_cost(frames: list) -> float:
    """Seconds per pipeline update after the warm-up ticks."""
    pipeline, timed = build_pipeline(PLUGINS), 0.0
    for i, frame in enumerate(frames):
        start = time.perf_counter()
        pipeline.update(frame)
        if i >= WARMUP_TICKS:
            timed += time.perf_counter() - start
    return timed / (len(frames) - WARMUP_TICKS)


def rank_budget_cost(frames: list) -> float:
    """Seconds per tick the rank budgets take on the same reports (the job's budget beside them, untimed)."""
    builder, ranks, timed, last = BudgetBuilder(), RankBudgets(), 0.0, None
    for i, frame in enumerate(frames):
        report = frame.training
        new = report is not None and report is not last
        last = report
        budget = builder.add(frame.ts, report) if new else None
        start = time.perf_counter()
        if new:
            ranks.add(frame.ts, report, budget)
        ranks.worst()
        if i >= WARMUP_TICKS:
            timed += time.perf_counter() - start
    return timed / (len(frames) - WARMUP_TICKS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (their median is printed)")
    runs = parser.parse_args().runs
    print(f"{'scenario':<16}{'ranks':>6}  {'pipeline update':>16}  {'rank budgets':>13}  {'share':>6}")
    for scenario in ("healthy", "rank_straggler"):
        for n in (512, 4096):
            frames = frames_of(scenario, n)
            whole = statistics.median(pipeline_cost(frames) for _ in range(runs))
            part = statistics.median(rank_budget_cost(frames) for _ in range(runs))
            print(f"{scenario:<16}{n:>6}  {whole * 1e3:>13.3f} ms  {part * 1e3:>10.3f} ms  {part / whole:>6.1%}")


if __name__ == "__main__":
    main()
