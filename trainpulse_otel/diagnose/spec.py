"""A signal or a root cause, declared once with its meaning: what the core derives every table from.

A detector declares the :class:`SignalSpec` s it raises, a root-cause rule the
:class:`CauseSpec` it proposes; :mod:`.vocabulary` checks them and derives the
health impact, the step-budget component, the tie order and the exported
names from them, so a plugin's signal or cause is as first class as a
built-in one::

    LOSS_PLATEAU = SignalSpec("loss_plateau", "the loss stopped falling", TRAINING, impact=0.08, component=None)
    STALE_LR = CauseSpec("stale_learning_rate", "the LR schedule ended early", STEP, ("loss_plateau",),
                         "check the LR schedule")
"""

from __future__ import annotations

from dataclasses import dataclass

from .budget import COMPONENTS as STEP_COMPONENTS
from .types import DEFAULT_POLICY, Policy

#: Where a signal is measured.
GPU, HOST, TRAINING, RANKS, JOB = "gpu", "host", "training", "ranks", "job"
SIGNAL_LAYERS = (GPU, HOST, TRAINING, RANKS, JOB)
#: How deep a cause lies; equal confidence is broken deepest first (then in the order causes were declared).
HARDWARE, RANK, STEP, COMPUTE, MODEL = "hardware", "ranks", "step", "compute", "model"
CAUSE_LAYERS = (HARDWARE, RANK, STEP, COMPUTE, MODEL)
#: The component a report whose loss or gradient norm is not finite loses all of its time to (goodput books it).
NUMERICS = "numerics"
#: The components lost time is measured in: the step budget's (:mod:`.budget`), and diverged steps.
COMPONENTS = (*STEP_COMPONENTS, NUMERICS)
#: What the core does with a signal beyond weighing it (:attr:`SignalSpec.role`), at most one signal each.
ROLE_STALL, ROLE_STRAGGLER = "stall", "straggler"
ROLES = {
    ROLE_STALL: "its time is the goodput's stall, booked to the cause that explains it",
    ROLE_STRAGGLER: "its evidence's sync share is the part of the others' wait the late rank makes",
}


@dataclass(frozen=True, slots=True)
class SignalSpec:
    """One signal: its name and meaning, and what the core needs to weigh it.

    ``impact``: the share of health one warning-level finding costs (a critical one 2.5 times it).
    ``component``: the step-budget component whose lost time the signal is evidence of (None: none).
    ``predictive``: a forecast — about time not lost yet. ``explainer_claims``: a cause that explains
    this signal claims its lost time (the wait for a straggler it makes late, the stall of a rank it hangs).
    ``policy``: how its findings become a raised and a cleared signal (a detector may refine it).
    ``role``: what the core does with it beyond weighing it (:data:`ROLES`; one signal per role).
    ``measured``: it judges the job's efficiency (waits, MFU, throughput, stragglers), which is critical only
    where TrainPulse reads the machine beside the job's own figures: from a job's words alone (a log replayed
    with no GPU or host readings: sampled every Nth step, the framework's own FLOP count and peak), at most a
    warning. A failure the words tell (a crash, a timeout, a NaN, a stall) keeps its severity.
    """

    name: str
    meaning: str
    layer: str
    impact: float
    component: str | None
    predictive: bool = False
    explainer_claims: bool = False
    measured: bool = False
    policy: Policy = DEFAULT_POLICY
    role: str | None = None


@dataclass(frozen=True, slots=True)
class CauseSpec:
    """One root cause: its name and meaning, the signals it can explain, and what to do about it.

    ``layer`` orders equal confidence (deepest first). ``books``: a budget component whose lost time is
    always this cause's (a checkpoint's time is ``checkpoint_io_bound``'s). ``wait``: the cause is time
    spent waiting, never slower compute.
    """

    name: str
    meaning: str
    layer: str
    explains: tuple[str, ...]
    remediation: str
    books: str | None = None
    wait: bool = False


@dataclass(frozen=True, slots=True)
class FactSpec:
    """A statistic a detector shares with the root-cause rules, declared once: its name, unit and meaning.

    A detector lists the facts it provides in ``provides`` and returns them from ``facts()`` under these names;
    :mod:`.vocabulary` rejects a name two detectors declare, and a rule reads a fact with its spec
    (:meth:`~.correlate.Evidence.fact`), never by a string.
    """

    name: str
    unit: str
    meaning: str
