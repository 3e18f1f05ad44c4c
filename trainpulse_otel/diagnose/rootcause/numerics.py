"""The rule about the numbers the model computes: loss spikes and non-finite losses or gradients.

``numerical_instability`` is proposed from ``nonfinite_loss`` and/or
``loss_spike``. Once the loss is non-finite the steps that follow train
nothing, so their whole time is lost: goodput books it to this cause and the
step-time budget's ``numerics`` component (:mod:`..goodput`), which is what
this cause claims when causes are ranked by the time they explain. A spike
that recovers loses no step time; it ranks by the strength of its evidence.
"""

from __future__ import annotations

from typing import Any

from ..correlate import Evidence
from ..detectors.nonfinite import NONFINITE_LOSS
from ..detectors.numerics import LOSS_SPIKE
from ..spec import MODEL, NUMERICS, CauseSpec
from ..types import Signal
from .common import CONFIRMED, CORROBORATED, base_confidence
from .ranking import Candidate, Rule

NUMERICAL_INSTABILITY = CauseSpec(
    "numerical_instability",
    "loss spikes or non-finite losses and gradients: the model's numbers diverge",
    MODEL,
    (NONFINITE_LOSS.name, LOSS_SPIKE.name),
    "rewind to the checkpoint before it, skip the batch, lower the learning rate, clip gradients",
    books=NUMERICS,
)

_AFTER_NONFINITE = (
    "Training has diverged: stop, or let the framework skip the step, and do not keep the checkpoints saved "
    "since step {step}. Rewind to the last checkpoint before it and skip the batch (or the data shard) at that "
    "step; inspect that shard for corrupt or extreme samples (empty documents, repeated tokens, bad labels). "
    "Lower the learning rate or lengthen the warm-up, and clip gradients (max_grad_norm / clip_grad 1.0). "
    "In fp16, check the dynamic loss scaler (initial scale, hysteresis, min_loss_scale): many skipped steps "
    "in a row mean the gradients overflow at every scale — train in bf16 instead, or keep the softmax, "
    "norms and loss in fp32."
)
_AFTER_SPIKE = (
    "A loss spike{where} at step {step}: if it recovers within a few hundred steps, note it; if spikes recur or "
    "grow, rewind to the checkpoint before the first one and skip those batches (OLMo-core and Megatron can "
    "skip or re-run a spiky step), inspect the data shard served at that step, lower the learning rate or "
    "lengthen the warm-up, and clip gradients (max_grad_norm 1.0). In fp16, check the loss scale; bf16 has "
    "fp32's range and does not overflow."
)


def propose(ev: Evidence) -> list[Candidate]:
    """``numerical_instability`` from a non-finite loss or gradient, a loss spike, or both."""
    nonfinite = ev.job_signal(NONFINITE_LOSS.name)
    spike = ev.job_signal(LOSS_SPIKE.name)
    primary = [s for s in (nonfinite, spike) if s is not None]
    if not primary:
        return []
    lead = primary[0]
    step = lead.evidence.get("first_step")
    subject = _subject(primary)
    if nonfinite is not None:
        summary = nonfinite.message + (f"; before it, {spike.message}" if spike is not None else "")
        remedy = _AFTER_NONFINITE.format(step="?" if step is None else step)
    else:
        summary = lead.message
        where = f" on rank {subject['rank']}" if "rank" in subject else ""
        remedy = _AFTER_SPIKE.format(where=where, step="?" if step is None else step)
    confidence = base_confidence(primary, CORROBORATED, CONFIRMED)
    return [Candidate(NUMERICAL_INSTABILITY.name, confidence, summary, remedy, primary, subject=subject)]


def _subject(signals: list[Signal]) -> dict[str, Any]:
    """The rank(s) the evidence names, when ranks report their own losses."""
    ranks: set[int] = set()
    for s in signals:
        if "rank" in s.evidence:
            ranks.add(s.evidence["rank"])
        ranks.update(s.evidence.get("ranks", ()))
    if len(ranks) == 1:
        return {"rank": next(iter(ranks))}
    return {"ranks": sorted(ranks)} if ranks else {}


NUMERICS = Rule(NUMERICAL_INSTABILITY, propose)
