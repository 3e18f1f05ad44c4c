"""What a line says of the job's numbers in words, not fields: a loss or gradient gone non-finite, the loss scale.

Frameworks and training scripts say a NaN in sentences as often as in iteration fields: TensorFlow's ``Model
diverged with loss = NaN.``, detectron2's ``FloatingPointError: Loss became infinite or NaN at iteration=2137!``,
BigDL's ``Loss is Infinity.``, torchvision's ``Loss is nan, stopping training``, Megatron forks' ``found NaN in
local grad norm``, fairseq's ``nan_detector | Inf detected in output of …`` and its ``overflow detected, setting
loss scale to: 0.25``, Apex's ``Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0``, a
debug print of ``'loss_cls': tensor(nan, …)``. :func:`statement` reads one such line into a training payload
(``loss`` or ``grad_norm`` non-finite, or the ``loss_scale`` an overflow left and the step it skipped, with the step
where the line gives one): whether a skipped step is the scaler at work or a fault is the ``nonfinite_loss``
detector's judgement (a scale still in its warm-up is no fault). Apex's bare ``NaN or Inf found in input tensor``
is no statement: it comes with every overflow. Pure.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .checkpoints import checkpoint_said
from .keys import record_start

#: ``loss = NaN``, ``Loss is Infinity``, ``Loss became infinite or NaN``, ``grad norm is nan``, a JSON line's
#: ``"grad_norm": NaN,`` (a Trainer's ``trainer_state.json``), ESPnet's ``loss (=nan) is not correct``, a loop's
#: ``Step at 4 with Perplexity: nan`` (the exponent of a loss gone NaN; an infinite one is a finite loss over ~88,
#: exp's overflow: :data:`PERPLEXITY`): a loss, its perplexity or a gradient norm named, up to three words, a verb or
#: ``=``, then a non-finite value.
SAID = re.compile(
    r"\b(?P<what>loss|perplexity|ppl|grad(?:ient)?s?(?:[ _]norm)?)\b['\"]?(?:\s+[\w`'.]+){0,3}?\s*\(?(?:is|are|was|were|became|becomes|=|:)\s*"
    r"(?:infinite or |inf or )?(?P<value>nan|inf(?:inity|inite)?|infinite)\b",
    re.IGNORECASE,
)
#: A loss's exponent: infinite while the loss is finite (float32's exp overflows past ~88), NaN only with it.
PERPLEXITY = ("perplexity", "ppl")
#: ``Loss is not finite``, SpeechBrain's ``Parameter is not finite``, torch's ``clip_grad_norm_`` error ``The total norm
#: of order 2.0 for gradients from `parameters` is non-finite``: the numbers named, then "not finite" in words.
NOT_FINITE = re.compile(
    r"\b(?P<what>loss|parameter|grad(?:ient)?[ _]norm|total norm)\b(?:[^.]|\.\d){0,60}?\b(?:is|are|was|became) "
    r"(?:not finite|non-finite)\b",
    re.IGNORECASE,
)
#: icefall's scaler check: ``Grad scale is small: 1.2924697071141057e-26``, ``grad_scale is too small, exiting: …``.
GRAD_SCALE = re.compile(r"[Gg]rad[ _]scale is (?:too )?small(?:, exiting)?:\s*(?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)")
#: ``found NaN in local grad norm``, ``found inf in gradients``, fairchem's ``Found nans while computing loss``.
FOUND = re.compile(r"\bfound (?:nan|inf)s?\b[^.]{0,30}?\b(?P<what>grad(?:ient)?s?(?: norm)?|loss)", re.IGNORECASE)
#: The value named before the numbers: ``Got NaN losses``, ``NaN loss detected``, ``Inf or NaN in loss``, ``nan values
#: in gradients``, ``non-finite loss``, TensorFlow's ``Found Inf or NaN global norm`` (not a count or a check of them:
#: ``nan loss count: 0``, ``nan loss detection: on``).
VALUE_FIRST = re.compile(
    r"\b(?P<value>nan|inf(?:inite)?|non-finite)(?: (?:and/)?or (?:nan|inf(?:inite)?))?(?: values?)?(?: (?:in|of|for))?"
    r"(?: the)? [`'\"]?(?P<what>loss(?:es)?|grad(?:ient)?s?(?: norm)?|global norm)\b(?![ _]*(?:count|check|scale|detect(?!ed)|guard|skip))",
    re.IGNORECASE,
)
#: fairseq's NaN detector: ``Inf detected in output of decoder.layers.21``; autograd's anomaly mode: ``Function
#: 'LogSoftmaxBackward' returned nan values in its 0th output.``; ``clip_grad_norm_``'s warning (PyTorch 1.9+, its
#: ``error_if_nonfinite`` off): ``Non-finite norm encountered in torch.nn.utils.clip_grad_norm_; continuing anyway``;
#: TensorFlow 1's summary op on a tensor gone NaN: ``Invalid argument: Nan in summary histogram for: FeatureExtractor/…``;
#: ``torch.distributions`` refusing a NaN parameter (``… to satisfy the constraint Real(), but found invalid values:``:
#: only NaN fails Real(), a policy's outputs gone NaN) and ``torch.multinomial`` sampling from NaN probabilities
#: (``probability tensor contains either `inf`, `nan` or element < 0``).
DETECTED = re.compile(
    r"\b(?:NaN|Inf) detected in (?:output|the loss|grad)|\bFunction '\w+' returned nan values in its \d+\w* output"
    r"|(?<!no )\b(?:NaN|Inf) (?:detected \(attempt|persisted)|\bDetected (?:NaN|Inf)(?: or (?:NaN|Inf))? in (?:w?grad|loss)"
    r"|\bcontains? (?:NaN|Inf)\b|\bThere are NAN or INF\b|\bInvalid loss, terminating training"
    r"|\bNon-finite norm encountered in torch\.nn\.utils\.clip_grad_norm_|\bNan in summary histogram for\b"
    r"|\bconstraint Real\(\), but found invalid values|\bprobability tensor contains either `?inf`?, `?nan`? or element",
    re.IGNORECASE,
)
#: A tensor printed with a non-finite value beside a loss's name: ``'loss_cls': tensor(nan, device='cuda:0'``; or a
#: scalar tensor printed alone, a loop's ``print(loss)``: ``tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)``.
TENSOR = re.compile(
    r"loss\w*'?\"?\s*[:=]\s*tensor\((?:nan|-?inf)\b|^\s*tensor\((?:nan|-?inf), (?:device|grad_fn)=", re.IGNORECASE
)
#: A loss printed as an array, one per trainer or device, with a non-finite element: Paddle's ``loss [     nan
#: 9.211133      nan …]``, ``losses: [nan, 2.31]``.
ARRAY = re.compile(r"\bloss(?:es)?\b\s*[:=]?\s*\[(?P<items>[^\]]*)", re.IGNORECASE)
NONFINITE_ITEM = re.compile(r"(?:^|[\s,])[-+]?(?:nan|inf)\b", re.IGNORECASE)
#: fairseq's scaler: ``overflow detected, setting loss scale to: 0.25``; ``Minimum loss scale reached (0.0001)``.
SCALE_SET = re.compile(r"overflow detected, setting loss scale to:?\s*(?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)")
#: Apex's amp scaler: ``Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.00390625``.
APEX_SCALE = re.compile(
    r"Skipping step, (?:loss scaler \d+ )?reducing loss scale to (?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)"
)
#: Other scalers' words for an overflow that lowered the scale: mmcv's ``Check overflow, downscale loss scale to 512``,
#: ColossalAI's ``Overflow occurs, the loss scale is adjusted to 512``, fairseq's AMP ``overflow detected, setting scale
#: to to 64`` (sic), fairseq2's ``Overflow detected at step 3, ignoring gradient, decreasing loss scale from 8 to 4``.
OVERFLOW_SCALE = re.compile(
    r"[Oo]verflow\b.{0,60}?\bscale\b.{0,25}?\bto:?\s*(?:to\s+)?(?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)"
)
#: A scaler that cannot lower its scale any more: DeepSpeed's ``Current loss scale already at minimum - cannot decrease
#: scale anymore. Exiting run.`` (its minimum is 1 unless the line says it), fairseq2's ``… loss scale is already at
#: minimum (0.0001)``.
AT_MINIMUM = re.compile(
    r"loss scale (?:is )?already at (?:its )?minimum(?: \((?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)\))?"
)
SCALE_FLOOR = re.compile(r"Minimum loss scale reached \((?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)\)")
#: NVIDIA's fp16 optimizer in its MLPerf GNMT: ``Skipped batch, new scale: 2048.0`` and ``Upscaling, new scale: 4096.0``.
NEW_SCALE = re.compile(r"(?P<what>Skipped batch|Upscaling), new scale:\s*(?P<scale>\d+\.?\d*(?:[eE][-+]?\d+)?)")
#: The step the line names: ``at iteration=2137``, ``iteration 12``, ``step 40``.
STEP = re.compile(r"\b(?:iteration|iter|step)\s*[=:]?\s*(\d+)\b", re.IGNORECASE)


def statement(text: str) -> dict[str, Any] | None:
    """The payload a line's words give of the job's numbers (see the module docstring), or None."""
    if not _hinted(text):
        return None
    if (said := checkpoint_said(text)) is not None:  # a save's duration: the time it blocked training
        return {"checkpoint_ms": said[1]["duration_s"] * 1000.0} if said[0] == "save" else None
    payload = (
        _scale(text)
        if "scale" in text and ("loss scale" in text or "verflow" in text or "new scale" in text or "scale is" in text)
        else None
    )
    if payload is None and not record_start(text):  # (``loss decreased (inf --> 1.22)``: a record's sentinel)
        payload = _nonfinite(text)
    if payload is not None and (step := STEP.search(text)) is not None:
        payload["global_step"] = int(step[1])
    return payload


def _hinted(text: str) -> bool:
    """The cheap test every line not read otherwise passes first: a NaN, an infinity or a loss scale named
    (``INFO`` is no ``INF``)."""
    return (
        "nan" in text
        or "NaN" in text
        or "NAN" in text
        or "inf" in text
        or "Inf" in text
        or "loss scale" in text
        or "finite" in text
        or "rad scale is" in text
        or "new scale:" in text
        or "verflow" in text
        or "Invalid loss" in text
        or "Nan in summary" in text
        or "invalid values" in text
        or "the checkpoint" in text
        or "Checkpoint Save" in text
        or "rad_scale is" in text
        or ("INF" in text and "INFO" not in text)
    )


def _nonfinite(text: str) -> dict[str, Any] | None:
    if (match := SAID.search(text)) is not None and not (
        match["what"].lower() in PERPLEXITY and match["value"][0] in "iI"
    ):
        field = "grad_norm" if match["what"].lower().startswith("grad") else "loss"
        return {field: math.inf if match["value"].lower().startswith("inf") else math.nan}
    if (match := FOUND.search(text) or VALUE_FIRST.search(text)) is not None:
        return {"loss" if match["what"].lower().startswith("loss") else "grad_norm": math.nan}
    if (match := DETECTED.search(text)) is not None:
        return {"grad_norm" if "grad" in match[0].lower() else "loss": math.nan}
    if TENSOR.search(text) is not None:
        return {"loss": math.nan}
    if (array := ARRAY.search(text)) is not None and NONFINITE_ITEM.search(array["items"]) is not None:
        return {"loss": math.nan}
    if (match := NOT_FINITE.search(text)) is not None:
        what = match["what"].lower()
        return {"grad_norm" if what.startswith(("grad", "total")) else "loss": math.nan}
    return None


def _scale(text: str) -> dict[str, Any] | None:
    if (match := SCALE_SET.search(text)) is not None:  # fairseq's: judged by the scale it reaches, not the skips
        return {"loss_scale": float(match["scale"])}
    if (match := AT_MINIMUM.search(text)) is not None:
        return {"loss_scale": float(match["scale"] or 1.0), "skipped_steps": 1}
    if (match := SCALE_FLOOR.search(text) or APEX_SCALE.search(text)) is not None:
        return {"loss_scale": float(match["scale"]), "skipped_steps": 1}
    if (match := GRAD_SCALE.search(text)) is not None:
        return {"loss_scale": float(match["scale"])}
    if (match := OVERFLOW_SCALE.search(text)) is not None:
        return {"loss_scale": float(match["scale"])}
    if (match := NEW_SCALE.search(text)) is not None:
        skipped = {"skipped_steps": 1} if match["what"] == "Skipped batch" else {}
        return {"loss_scale": float(match["scale"]), **skipped}
    return None
