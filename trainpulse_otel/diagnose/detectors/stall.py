"""``training_stalled``: no training step completes while the job is expected to run.

A hung job looks healthy to every other detector: no report is new, so they hold their
judgement. This one watches progress instead — ``global_step`` advancing in the job's report or
in any rank's heartbeat — and raises when none came for max(``min_stall_s``, ``step_multiple`` ×
the median step time), or for the shorter max(``min_stall_with_peers_waiting_s``,
``step_multiple_with_peers_waiting`` × the median step) where the heartbeats show it plainly: most
ranks waiting in a collective all that time, the few others stuck elsewhere (not in an evaluation,
a save or idle), and a median step from ``min_step_reports`` reports. "Expected to run": some
rank's heartbeat is in a phase other than ``idle``, or, without heartbeats, some GPU is busy; a
rank in a reported ``checkpoint`` phase, a job that ended and a pause with every GPU idle are not
stalls.

Who is stuck is worked out here, where the heartbeats are (``rank_hang`` reads it from the
evidence): the ranks behind in ``global_step``; else the ranks outside the collective the others
wait in; else the ranks whose stack differs from the one most share (:mod:`..stacks`, listed as
``stacks``); without heartbeats, the idle GPU among peers spinning at high utilisation and low
power (``spin_util``, ``spin_power_share``). Otherwise the rank is unknown, and the signal says so.
The rules and the measured latency: docs/signals.md ("training_stalled").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...samples import CHECKPOINT_PHASES, COLLECTIVE_PHASES, GpuSample, RankSample, RankStack, TrainingSample
from ..spec import JOB, ROLE_STALL, FactSpec, SignalSpec
from ..stacks import odd_ranks, stack_groups
from ..stats import RecentMedian
from ..thresholds import CONVENTION, COUNT, PERCENT, SECONDS, SHARE, TIMES, Knob, Thresholds
from ..tick import BUSY_UTIL, IDLE_UTIL, Tick
from ..types import CRITICAL, Finding, Policy
from .base import BaseDetector
from .hang_evidence import one_odd_stack, peers_wait_plainly
from .silence import SILENCE_KNOBS, Silences, told_message
from .stall_bounds import MIN_STALL_S, STEP_MULTIPLE

TRAINING_STALLED = SignalSpec(
    "training_stalled",
    "no training step completes while the job is expected to run",
    JOB,
    0.24,
    "stall",
    explainer_claims=True,
    policy=Policy(raise_evidence=2.0, min_observations=1, clear_after_s=2.0),
    role=ROLE_STALL,
)
#: Reports whose step times give the median step.
MEDIAN_REPORTS = 31
#: How long the job has been stalled, while it is.
STALLED_S = FactSpec("stalled_s", SECONDS, "how long the job has made no step, while training_stalled holds")
#: At most this many lagging ranks are listed in the evidence.
MAX_LISTED = 16


class TrainingStalled(BaseDetector):
    """``training_stalled`` (critical): no completed step for max(30 s, 10 x the median step), or for
    max(15 s, 5 x the median step) where the heartbeats plainly show the peers waiting in a collective.

    Raised on the second tick past the threshold; cleared two seconds after
    steps resume. Evidence: the stall's length and threshold, the last step,
    and the lagging ranks (rank, phase, phase age, GPU, host, pid) with how
    they were found (``heartbeats``, ``gpus``, or unknown).
    """

    name = "stall"
    signals = (TRAINING_STALLED,)
    provides = (STALLED_S,)
    knobs = (
        MIN_STALL_S,
        STEP_MULTIPLE,
        Knob(
            "min_stall_with_peers_waiting_s",
            15.0,
            SECONDS,
            CONVENTION,
            "the shortest stall where heartbeats show the peers waiting in a collective: the contract's max(15 s, "
            "5 x the median step); Mycroft (ByteDance, 2025) detects hangs within 15 s in 90 % of cases",
            1,
        ),
        Knob(
            "step_multiple_with_peers_waiting",
            5.0,
            TIMES,
            CONVENTION,
            "with the peers seen waiting, a stall is at least this many median steps (the contract)",
            1,
        ),
        Knob(
            "min_step_reports",
            10,
            COUNT,
            CONVENTION,
            "the faster threshold waits for a median step of this many reports: a long first step (compilation, "
            "warm-up) is not a hang",
            1,
            MEDIAN_REPORTS,
        ),
        Knob(
            "max_elsewhere_share",
            0.25,
            SHARE,
            CONVENTION,
            "plain evidence: the ranks elsewhere are at most this share of those heartbeating (one always may be), "
            "the waiting ranks a majority",
            0,
            1,
        ),
        Knob(
            "spin_util",
            90.0,
            PERCENT,
            CONVENTION,
            "a peer spinning in a collective is this busy, below spin_power_share of its power limit",
            0,
            100,
        ),
        Knob("spin_power_share", 0.5, SHARE, CONVENTION, "an NCCL kernel polling draws little power", 0, 1),
        *SILENCE_KNOBS,
        Knob(
            "write_surge",
            3.0,
            TIMES,
            CONVENTION,
            "without heartbeats, disk writes at this many times their usual rate may be a save: not judged",
            1,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self._steps = RecentMedian(MEDIAN_REPORTS)
        self._last_step: int | None = None
        self._progress_ts: float | None = None
        self.stalled_s = 0.0
        self._silences = Silences(self.thresholds)
        self._plain_at: float | None = None  # the stall (its last progress) whose hang the heartbeats showed plainly

    def update(self, tick: Tick) -> list[Finding] | None:
        training, ts = tick.training, tick.ts
        self._silences.observe(tick.frame.events)
        if tick.report is not None:
            self._silences.progressed(tick.report.global_step)
        told = self._silences.worst
        if told is not None:  # the job's own stamped lines showed the stall: a fact, whatever this tick holds
            return [
                Finding(
                    TRAINING_STALLED.name,  # (plain evidence, as a hang the heartbeats show: one reading raises it)
                    max(told["stalled_s"] / told["threshold_s"], TRAINING_STALLED.policy.raise_evidence),
                    CRITICAL,
                    told_message(told),
                    {},
                    told,
                )
            ]
        if training is None:
            if self._progress_ts is None:
                return None
            self._progress_ts = ts  # the job is gone (expired), not stalled
            return []
        self._observe(tick, training)
        if self._progress_ts is None:
            return None  # no step seen yet: a job still starting up is not judged
        self.stalled_s = stalled = ts - self._progress_ts
        threshold = self._threshold_now(ts, training, stalled, tick.frame.stacks)
        score = stalled / threshold
        if score < self.report_floor:
            return []  # (whether it should run is only asked of a gap worth judging: healthy ticks stay cheap)
        expected = _expected_to_run(tick, training, self.thresholds.write_surge)
        if expected is None:
            return None  # perhaps saving: no judgement this tick, the clock runs on
        if not expected:
            self._progress_ts = ts  # paused, ended or in a reported save: the stall clock starts again afterwards
            self.stalled_s = 0.0
            return []
        lag = _lagging(tick, training, self.thresholds)
        evidence = {
            "stalled_s": round(stalled, 1),
            "threshold_s": round(threshold, 1),
            "median_step_time_ms": None if self._steps.value is None else round(self._steps.value, 1),
            "last_global_step": self._last_step,
            **lag,
        }
        if threshold < self.threshold_s:
            evidence["peers_waiting"] = True
            score = max(score, TRAINING_STALLED.policy.raise_evidence)  # plain evidence: one reading raises it
        return [Finding(TRAINING_STALLED.name, score, CRITICAL, _message(stalled, threshold, lag), {}, evidence)]

    @property
    def threshold_s(self) -> float:
        """How long without a completed step counts as stalled, without plain evidence of where."""
        t = self.thresholds
        return self._multiple_of_step(t.min_stall_s, t.step_multiple)

    @property
    def peers_waiting_threshold_s(self) -> float | None:
        """The shorter threshold where heartbeats show the peers waiting; None until the median step rests on
        ``min_step_reports`` reports (a long first step has no median to be a multiple of)."""
        t = self.thresholds
        if len(self._steps) < t.min_step_reports:
            return None
        return self._multiple_of_step(t.min_stall_with_peers_waiting_s, t.step_multiple_with_peers_waiting)

    def _multiple_of_step(self, floor_s: float, multiple: float) -> float:
        median_ms = self._steps.value
        return max(floor_s, multiple * median_ms / 1000.0) if median_ms else floor_s

    def _threshold_now(
        self, ts: float, training: TrainingSample, stalled: float, stacks: tuple[RankStack, ...] = ()
    ) -> float:
        """The faster threshold once it is passed and the heartbeats plainly show a hang (for the rest of this
        stall: no flapping between the two); else the usual one.

        Every rank must have stayed in its phase for the faster threshold less one median step: the peers
        reach the collective up to a step after the last one completed, and have waited there since. Plain:
        the peers in a collective, or, where no phase tells one (the monitor given the inner module, not the DDP
        wrapper), one odd stack among ranks that stand alike (:mod:`.hang_evidence`)."""
        usual, faster = self.threshold_s, self.peers_waiting_threshold_s
        if faster is None or faster >= usual or stalled < faster:
            return usual
        if self._plain_at is not None and self._plain_at == self._progress_ts:
            return faster  # shown plainly once in this stall: a heartbeat that shows less later does not undo it
        step_s = (self._steps.value or 0.0) / 1000.0
        since, share = ts - faster + step_s, self.thresholds.max_elsewhere_share
        plain = peers_wait_plainly(since, training.ranks, share) or one_odd_stack(since, training.ranks, stacks, share)
        if plain:
            self._plain_at = self._progress_ts
        return faster if plain else usual

    def _observe(self, tick: Tick, training: TrainingSample) -> None:
        """Note progress: a higher step anywhere (report or heartbeat), a new report whose step went back (the job
        resumed from a checkpoint: it counts from there), or a new report without step numbers."""
        report, ts = tick.report, tick.ts
        if report is not None and report.step_time_ms and not report.checkpoint_ms:
            self._steps.add(report.step_time_ms)
        back = report.global_step if report is not None else None
        if back is not None and self._last_step is not None and back < self._last_step:
            self._last_step, self._progress_ts = back, ts
            return
        step = training.global_step
        if step is None or self._last_step is None or step <= self._last_step:
            step = _job_step(training)  # the job's report did not move: a rank's heartbeat may have
        if step is not None and (self._last_step is None or step > self._last_step):
            self._last_step = step
            self._progress_ts = ts
        elif step is None and report is not None and report.step_time_ms:
            self._progress_ts = ts

    def facts(self) -> dict[str, Any]:
        return {STALLED_S.name: self.stalled_s} if self.stalled_s else {}


def _job_step(training: TrainingSample) -> int | None:
    """The furthest step the job or any rank has completed."""
    steps = [r.global_step for r in training.ranks if r.global_step is not None]
    if training.global_step is not None:
        steps.append(training.global_step)
    return max(steps) if steps else None


def _expected_to_run(tick: Tick, training: TrainingSample, write_surge: float) -> bool | None:
    """Should steps be completing now? None: cannot tell this tick (the disk writes at several times its usual
    rate, perhaps a save nobody reported; a one-tick burst of writes must not restart the stall clock)."""
    phases = [r.phase for r in training.ranks if r.phase is not None]
    if phases:
        return not CHECKPOINT_PHASES.intersection(phases) and any(p != "idle" for p in phases)
    surge = tick.node.host.write_surge()
    if surge is not None and surge >= write_surge:
        return None
    return any((g.utilization_percent or 0.0) >= BUSY_UTIL for g in tick.gpus)


def _lagging(tick: Tick, training: TrainingSample, t: Thresholds) -> dict[str, Any]:
    """The stuck ranks and how they were found (``inferred_from``; None when they are unknown)."""
    beating = [r for r in training.ranks if r.phase is not None]
    if beating:
        return _from_heartbeats(tick.ts, beating, tick.frame.stacks)
    return _from_gpus(tick, training, t)


def _from_heartbeats(ts: float, ranks: list[RankSample], stacks: tuple[RankStack, ...] = ()) -> dict[str, Any]:
    steps = [r.global_step for r in ranks if r.global_step is not None]
    top = max(steps) if steps else None
    behind = [r for r in ranks if top is not None and r.global_step is not None and r.global_step < top]
    if not behind:  # the same step everywhere: those not inside the collective the others wait in
        outside = [r for r in ranks if r.phase not in COLLECTIVE_PHASES]
        behind = outside if len(outside) < len(ranks) else []
    groups, found_by = stack_groups(ranks, stacks), "heartbeats"
    if not behind and (odd := set(odd_ranks(groups))):  # one phase and step everywhere: the odd stacks
        behind, found_by = [r for r in ranks if r.rank in odd], "stacks"
    lagging = {r.rank for r in behind}
    waiting = [r for r in ranks if r.phase in COLLECTIVE_PHASES and r.rank not in lagging]
    out: dict[str, Any] = {"inferred_from": found_by if behind else None, "heartbeat_ranks": len(ranks)}
    out["heartbeat_rank_ids"] = sorted(r.rank for r in ranks)[:MAX_LISTED]
    if groups:
        out["stacks"] = groups
    if waiting:
        out["waiting_phase"] = Counter(r.phase for r in waiting).most_common(1)[0][0]
        out["waiting_ranks"] = len(waiting)
    out["lagging"] = [_rank_entry(ts, r) for r in behind[:MAX_LISTED]]
    out["lagging_count"] = len(behind)
    return out


def _rank_entry(ts: float, r: RankSample) -> dict[str, Any]:
    entry: dict[str, Any] = {"rank": r.rank, "phase": r.phase}
    if r.phase_since is not None:
        entry["phase_age_s"] = round(max(0.0, ts - r.phase_since), 1)
    for name in ("global_step", "gpu_index", "hostname", "pid"):
        value = getattr(r, name)
        if value is not None:
            entry[name] = value
    return entry


def _from_gpus(tick: Tick, training: TrainingSample, t: Thresholds) -> dict[str, Any]:
    """No heartbeats: a minority of idle GPUs while the rest spin busy at low power are the stuck ranks'.

    A GPU's rank is the one the job's reports placed on it; a job that never said, with one rank per GPU of
    this node (``world_size`` equal to the GPUs), is taken to run rank i on GPU i (``LOCAL_RANK``), and the
    entry says it was assumed.
    """
    idle = [g for g in tick.gpus if g.utilization_percent is not None and g.utilization_percent < IDLE_UTIL]
    spinning = [g for g in tick.gpus if _spinning(g, t)]
    if not idle or len(idle) >= len(spinning):
        return {"inferred_from": None, "lagging": [], "lagging_count": 0}
    node = tick.node
    one_per_gpu = not node.rank_of_gpu and not tick.frame.nodes and training.world_size == len(tick.gpus)
    lagging = []
    for g in idle[:MAX_LISTED]:
        entry: dict[str, Any] = {"gpu_index": g.index, "utilization_percent": g.utilization_percent}
        rank = node.rank_of_gpu.get(g.key)
        if rank is None and one_per_gpu:
            rank, entry["rank_assumed"] = g.index, True
        if rank is not None:
            entry["rank"] = rank
        hostname = g.node or node.hostname
        if hostname is not None:
            entry["hostname"] = hostname
        lagging.append(entry)
    return {
        "inferred_from": "gpus",
        "lagging": lagging,
        "lagging_count": len(idle),
        "waiting_gpus": len(spinning),
    }


def _spinning(g: GpuSample, t: Thresholds) -> bool:
    """Busy at low power (an NCCL kernel polling), or just busy where the board's power is not reported."""
    util, power, limit = g.utilization_percent, g.power_watts, g.power_limit_watts
    if util is None or util < t.spin_util:
        return False
    return power is None or not limit or power < t.spin_power_share * limit


def _message(stalled: float, threshold: float, lag: dict[str, Any]) -> str:
    head = f"no training step has completed for {stalled:.0f} s (threshold {threshold:.0f} s)"
    lagging = lag["lagging"]
    if not lagging:
        return f"{head}; which rank is stuck is unknown" + (
            f": every rank waits in {lag['waiting_phase']}" if lag.get("waiting_phase") else ""
        )
    if lag["inferred_from"] == "gpus":
        who = ", ".join(_gpu_words(e) for e in lagging)
        return f"{head}: {who} idles while {lag['waiting_gpus']} peer GPUs spin busy at low power (in a collective)"
    who = ", ".join(_rank_words(e) for e in lagging)
    if lag["lagging_count"] > len(lagging):
        who += f" and {lag['lagging_count'] - len(lagging)} more"
    tail = f" while {lag['waiting_ranks']} ranks wait in {lag['waiting_phase']}" if lag.get("waiting_phase") else ""
    return f"{head}: {who}{tail}"


def _rank_words(e: dict[str, Any]) -> str:
    where = f" (GPU {e['gpu_index']})" if "gpu_index" in e else ""
    age = f" for {e['phase_age_s']:.0f} s" if "phase_age_s" in e else ""
    step = f" at step {e['global_step']}" if "global_step" in e else ""
    return f"rank {e['rank']}{where} is in {e['phase']}{age}{step}"


def _gpu_words(e: dict[str, Any]) -> str:
    return f"rank {e['rank']}'s GPU {e['gpu_index']}" if "rank" in e else f"GPU {e['gpu_index']}"
