"""Goodput adds up: over generated jobs, the badput by cause sums to the wall time not counted as productive.

Each generated job has random step times, loader waits, compute slowdowns, saves (the step that ends one
includes it, as a rank's step does), pauses long enough to be stalls, a straggler rank, and reports of one
step or of several (the mean of their steps, or the last one's — a sampled report); it is fed through the
budget, the per-rank budgets and the goodput account as the pipeline feeds them, a tick a second while it
is stalled. Whatever the job, the contract holds: ``sum(badput_s) == (1 - ratio) × wall_s``, ``wall_s``
the wall time since the first report; and a save's time is never also a compute or per-rank loss.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainpulse_otel.diagnose.budget import BudgetBuilder, StepCounter
from trainpulse_otel.diagnose.goodput import GoodputAccount
from trainpulse_otel.diagnose.ledger import PRODUCTIVE, UNATTRIBUTED, WallLedger
from trainpulse_otel.diagnose.rank_budget import RankBudgets
from trainpulse_otel.diagnose.types import RootCause
from trainpulse_otel.samples import RankSample, TrainingSample

T0 = 1_764_400_000.0
#: A pause this long is a stall (the detector's threshold is of this order).
STALL_AFTER_S = 30.0
#: Causes active throughout: a compute loss has a cause to show under, a stall a cause that names it.
CAUSES = (
    RootCause("rank_hang", 0.9, "a rank is stuck", signals=("training_stalled",)),
    RootCause("compute_inefficiency", 0.5, "slow kernels"),
)


@dataclass(repr=False)
class Job:
    """A generated job's reports, beside its own truth."""

    reports: list[tuple[float, TrainingSample]] = field(default_factory=list)  # (the tick that sees it, report)
    saves_s: float = 0.0
    slow_s: float = 0.0  # the time its compute slowdowns added
    straggler: int | None = None
    stall_after_s: float = STALL_AFTER_S  # no report for this long: training_stalled is raised

    def __repr__(self) -> str:  # hypothesis prints a failing job: its reports in brief
        shown = [
            (round(ts - T0, 2), r.global_step, round(r.step_time_ms), round(r.checkpoint_ms)) for ts, r in self.reports
        ]
        return f"Job(saves_s={self.saves_s}, slow_s={self.slow_s}, straggler={self.straggler}, reports={shown})"


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    base = draw(st.floats(0.05, 3.0))
    n_steps = draw(st.integers(200, 400))
    n_ranks = draw(st.integers(1, 8))
    every = draw(st.sampled_from([1, 1, 3, 7]))  # steps a report stands for
    last_only = draw(st.booleans())  # a sampled report: its step time is the last step's, save included
    save_at = set(draw(st.lists(st.integers(0, n_steps - 1), max_size=4)))
    pause_at = set(draw(st.lists(st.integers(20, n_steps - 1), max_size=2)))
    slowing = draw(st.booleans())  # from slow_from on, the compute slows and the loader starves
    slow_from = draw(st.integers(0, n_steps)) if slowing else n_steps
    slow = draw(st.floats(1.0, 2.0))
    starving = draw(st.floats(0.0, 0.5))  # the loader's extra wait, as a share of the step
    job = Job(straggler=draw(st.one_of(st.none(), st.integers(0, n_ranks - 1))) if n_ranks > 1 else None)
    job.stall_after_s = max(STALL_AFTER_S, 3.0 * every * base * slow)  # the stall detector knows the job's pace
    t, step, held = T0, 1000, []
    for i in range(n_steps):
        late = i >= slow_from
        compute = base * rng.uniform(0.98, 1.02) * (slow if late else 1.0)
        data = base * (0.01 + (starving if late else 0.0))
        save = base * rng.uniform(1, 30) if i in save_at else 0.0
        pause = rng.uniform(2.0, 3.0) * job.stall_after_s if i in pause_at else 0.0  # a hang
        job.slow_s += compute - base * rng.uniform(0.98, 1.02) if late else 0.0
        job.saves_s += save
        held.append((compute + data + save + pause, data, save))
        t += held[-1][0]
        step += 1
        if len(held) == every or i == n_steps - 1:
            seen = max(t + rng.uniform(0.0, 0.2), job.reports[-1][0] if job.reports else t)  # the tick that sees it
            job.reports.append((seen, _report(step, held, last_only, n_ranks, job.straggler)))
            held = []
    return job


def _report(
    step: int, held: list[tuple[float, float, float]], last_only: bool, n_ranks: int, straggler: int | None
) -> TrainingSample:
    """The report of the steps ``held`` ((wall, data wait, save) each, seconds): the mean of their steps or the
    last one's, the longest save; each rank's step time includes the save, the straggler's loader is slow."""
    step_s = held[-1][0] if last_only else sum(w for w, _, _ in held) / len(held)
    data_s = sum(d for _, d, _ in held) / len(held)
    ranks = tuple(
        RankSample(
            rank=r,
            step_time_ms=step_s * 1000,
            data_wait_ms=data_s * 1000 + (0.3 * step_s * 1000 if r == straggler else 0.0),
            sync_wait_ms=0.0 if r == straggler else 0.3 * step_s * 1000 if straggler is not None else 1.0,
        )
        for r in range(n_ranks)
    )
    saved = max(s for _, _, s in held)
    return TrainingSample(
        global_step=step,
        step_time_ms=step_s * 1000,
        data_wait_ms=data_s * 1000,
        checkpoint_ms=saved * 1000,
        ranks=ranks,
    )


def account_for(job: Job) -> tuple[GoodputAccount, RankBudgets, float]:
    """Feed the job's reports as the pipeline does — a tick a second while no report came for
    ``job.stall_after_s`` (``training_stalled`` raised) — and return the account, the rank budgets and the last tick."""
    builder, counter, ranks, account = BudgetBuilder(), StepCounter(), RankBudgets(), GoodputAccount()
    last = None
    for ts, report in job.reports:
        stalled = last is not None and ts - last > job.stall_after_s
        tick = (last or ts) + job.stall_after_s
        while stalled and tick < ts:
            account.stall(tick)
            account.attribute_stall(CAUSES)
            tick += 1.0
        steps = counter.advance(report)
        budget = builder.add(ts, report, steps, stalled=stalled)
        ranks.add(ts, report, budget, stalled=stalled)
        account.add(ts, report, budget, builder.ideal_ms, CAUSES, 0.0, steps)
        last = ts
    return account, ranks, last


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_the_badput_adds_up_to_the_wall_time_not_productive_and_no_second_counts_twice(job):
    account, _, last = account_for(job)
    goodput = account.goodput(last)
    first = job.reports[0][0]
    assert goodput is not None and goodput.wall_s is not None
    badput, lost = sum(goodput.badput_s.values()), 1.0 - goodput.ratio
    assert badput == pytest.approx(lost * goodput.wall_s, rel=1e-9, abs=1e-9)  # the identity, by construction
    assert goodput.wall_s == pytest.approx(last - first, rel=1e-12)  # every second since the first report
    assert badput <= lost * (last - first) + 1e-9 and lost <= 1.0
    assert all(s >= 0 for s in goodput.badput_s.values())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_a_save_is_the_saves_time_and_never_also_a_compute_or_a_ranks_loss(job):
    account, ranks, last = account_for(job)
    goodput = account.goodput(last)
    ideal_s = goodput.ideal_step_time_ms / 1000.0
    assert goodput.badput_s.get("checkpoint_io_bound", 0.0) <= job.saves_s + 1e-6
    # compute is only what the slowdowns added (the jitter around the ideal step, and two steps carried, aside)
    assert goodput.badput_s.get("compute_inefficiency", 0.0) <= job.slow_s + 0.03 * (last - job.reports[0][0])
    if job.slow_s == 0.0:  # saves and stalls are the job's: no rank but the straggler is late beyond the noise
        late = [r for r in ranks.worst() if r.lost_ms_per_step > 0.05 * goodput.ideal_step_time_ms]
        assert [r.rank for r in late] in ([], [job.straggler])
    assert ideal_s > 0  # a first report that is all save never makes the ideal step zero


def test_the_ledger_books_each_second_once_whatever_the_claims():
    ledger = WallLedger()
    ledger.advance(T0, [], None)  # the first report: the wall time counts from it
    ledger.advance(T0 + 1.0, [(PRODUCTIVE, 0.0)], 2.0)  # a report of no step: its second waits, open
    assert ledger.wall_s == 1.0 and ledger.open_s == 1.0 and ledger.productive_s == 0.0 and ledger.booked == {}
    claims = [("checkpoint_io_bound", 1.5), (PRODUCTIVE, 1.0), ("compute_inefficiency", 9.0)]
    ledger.advance(T0 + 2.0, claims, 2.0)
    # two seconds to book: the save's 1.5 s first, then half a second of productive time; of the rest, two
    # seconds' claims wait for wall time a later report leaves over, and the compute beyond them is dropped
    assert ledger.booked == {"checkpoint_io_bound": 1.5} and ledger.productive_s == pytest.approx(0.5)
    assert ledger.open_s == 0.0 and ledger.dropped_s == pytest.approx(7.5)
    ledger.advance(T0 + 30.0, [], 2.0)  # 28 s: the waiting claims take 2, two stay open, the rest is unattributed
    assert ledger.productive_s == pytest.approx(1.0) and ledger.booked["compute_inefficiency"] == pytest.approx(1.5)
    assert ledger.booked[UNATTRIBUTED] == pytest.approx(24.0) and ledger.open_s == pytest.approx(2.0)
    assert ledger.book_now(T0 + 40.0, "rank_hang") == pytest.approx(10.0)  # a stall's time, as it passes
    booked = ledger.productive_s + ledger.open_s + sum(ledger.booked.values())
    assert booked == pytest.approx(ledger.wall_s) == pytest.approx(40.0)
