"""Iteration lines of any format: a line that carries a step and a loss is a training report.

The reader's last resort, after every framework it knows (:mod:`.frameworks`): nanoGPT's
``iter 1631: loss 4.0863, time 561.94ms, mfu 15.34%``, llm.c's ``step 1/74 | train loss 11.01 | norm 15.4 |
(123.45 ms | 4156 tok/s)``, verl's ``step:2 - … - train/loss:nan - …``, torchvision's MetricLogger
``Epoch: [0]  [ 10/500]  eta: …  loss: 2.3100 (2.4000)  time: 0.5000  data: 0.0100``, mmcv, detectron2,
timm, fairseq, RETURNN, Keras, JSON lines and a script's own ``print``. A line is cut into ``key value``
pairs (separated by ``:``, ``=`` or a space; pairs by ``,``, ``|``, `` - `` or blanks), each key read by its
meaning (:data:`KEYS`), units from the value (``ms``, ``s``, ``%``, ``s/it``, ``it/s``, ``tok/s``).

What makes a report: a step (``iter``, ``step``, ``global_step``, ``num_updates``, ``N/M``, an epoch with
its batch ``[i/N]``, else an integer epoch) and a loss. The loss is the training loss when the line names
one (:data:`PRIMARY_LOSSES`); any other loss-like field that is NaN or infinite (an RL objective, an
auxiliary loss) makes the report's loss non-finite, since a numerical fault is one wherever it shows. A
line about evaluation (``val loss``, ``eval_…``, ``test``) is no report. Pure: text in, payloads out.
"""

from __future__ import annotations

import math
import re
from typing import Any

Payload = dict[str, Any]

#: ``key value`` pairs: a key of up to four words (letters, digits, ``_./()-``; no later word a ``nan``, which is a
#: value: ``loss nan lr 0.1``), optionally quoted or bracketed (``[Loss] 5.2``), then ``:``,
#: ``=`` or a blank, then a number (thousands separators, exponent, NaN and infinities; optionally quoted, or
#: inside ``tensor(…)``) and its unit; a number a letter runs on from is none (``time 1d 06h``: a duration). NaN as
#: consoles spell it too: PaddleOCR's ``{:x<6f}`` pads it to ``nanxxx``, MSVC's runtime writes ``-nan(ind)`` and,
#: before 2015, ``1.#QNAN`` / ``-1.#IND`` / ``1.#INF``.
PAIR = re.compile(
    r"(?P<key>[A-Za-z_][\w./()\-]*(?: (?!(?:nan|inf(?:inity)?)\b)[A-Za-z_][\w./()\-]*){0,3})(?:['\"]|\])?\s*(?:[:=]\s*|\s+)"
    r"(?:tensor\()?['\"]?"
    r"(?P<num>[-+]?1\.#(?:QNAN|IND|INF)\d*|[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
    r"|[-+]?(?:nan|inf(?:inity)?)(?:x+\b|\(ind\)|\b))"
    r"['\"]?\s?(?:(?P<unit>ms/(?:step|it(?:er)?|batch)|s/(?:step|it(?:er)?|batch)|it/s|(?:tok(?:en)?s?|samples?)/s(?:ec)?|ms|secs?|s|%)"
    r"(?![A-Za-z]))?(?![A-Za-z])(?P<clock>:\d)?",
    re.IGNORECASE,
)
#: A rate after a number with no key of its own: ``1.23s/it``, ``4.5it/s``, ``4156 tok/s``, ``120 ms/step``, and,
#: last, a bare ``(123.45 ms | …)`` (llm.c): on a line with a step, the iteration's time.
RATE = re.compile(
    r"(?P<num>\d+\.?\d*)\s?(?P<unit>s/it|it/s|steps?/s(?:ec)?|ms/(?:step|it|batch)|s/(?:step|it|batch)|sec/step|tok(?:en)?s?/s(?:ec)?|"
    r"samples?/s(?:ec)?|ms)\b",
    re.IGNORECASE,
)
#: A step with its total: ``step 1/74``, ``Iter [50/90000]``, ``[step 100/1000]``.
STEP_FRACTION = re.compile(
    r"\b(?:iter(?:ation)?s?|steps?|it|batch|updates?)\b\s*[:=]?\s*\[?\s*(\d+)\s*/\s*(\d+)", re.IGNORECASE
)
#: A batch in its epoch: ``[ 10/500]``, ``[100/1251 (  8%)]`` (MetricLogger, mmcv, timm); a bar's ``100/1000 [``.
BATCH_FRACTION = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*[\](]|(?:^|[\s|])(\d+)/(\d+) (?:\[|━)")
#: An epoch's header on a line of its own — Keras's ``Epoch 2/20`` (1.x's ``Epoch 2``), nnU-Net's ``epoch:  6`` —: the lines of its
#: batches (or its summary's) that follow name no epoch.
EPOCH_HEADER = re.compile(r"^\s*(?:Epoch (\d+)(?:/\d+)?|epoch:\s+(\d+))\s*$")
#: fairseq's progress before its ``num_updates``: ``| epoch 001  1000 / 331737 loss=9.57``, ``epoch 001:  100 / 1000``.
EPOCH_FRACTION = re.compile(r"\bepoch (\d+):?\s+(\d+) / (\d+)\b")
#: The epoch: ``Epoch: [2]``, ``Epoch [1][…]``, ``Epoch(train) [1]``, ``epoch 001``, ``Train: 3 [``, ``"epoch": 4``.
EPOCH = re.compile(r"\b(?:epoch(?:\(train\))?|train:)['\"]?\s*[:=]?\s*\[?\s*(\d+)\b", re.IGNORECASE)
#: Words that make a line evaluation's, not training's.
EVALUATION = re.compile(r"\b(?:val(?:id(?:ation)?)?|eval(?:uation)?|test)(?:\b|_|/)", re.IGNORECASE)

#: The training loss by name, in the order preferred when a line names several.
PRIMARY_LOSSES = (
    "loss",
    "train_loss",
    "train/loss",
    "training_loss",
    "lm_loss",
    "train/lm_loss",
    "total_loss",
    "loss/train",
    "train/total_loss",
    "avg_loss",
    "average_loss",
    "mean_loss",
    "closs",
    "cross_entropy_loss",
    "ce_loss",
    "train_loss_step",
    "loss_step",
    "batch_loss",
    "batch_avg_loss",  # icefall: ``Epoch 0, batch 10, batch avg loss 0.5356, total avg loss: 0.7556``
    "running_loss",
    "total_avg_loss",
    "loss/tok",  # NVIDIA's MLPerf GNMT and Transformer: ``Loss/tok 3.2949 (4.5542)``
    "xent",  # OpenNMT-py's cross-entropy: ``Step 5350/50000; acc:  51.25; ppl:  8.43; xent: 2.13; lr: 0.00066``
)
_PRIMARY_RANK = {name: i for i, name in enumerate(PRIMARY_LOSSES)}

#: Keys of the step counted over the whole run, preferred to the others (an epoch's own step, a batch index).
GLOBAL_STEP_KEYS = ("global_step", "globalstep", "trainer/global_step", "num_updates", "train/step")
STEP_KEYS = frozenset(
    (
        "iter",
        "iters",
        "iteration",
        "it",
        "step",
        "steps",
        "global_step",
        "globalstep",
        "train_step",
        "train/step",
        "trainer/global_step",
        "num_updates",
        "update",
        "updates",
        "n_iter",
        "batch",
        "tick",
    )
)
#: Contract field and the factor to it, by key; step times are resolved apart (their unit varies).
KEYS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(
        (
            "grad_norm",
            "gnorm",
            "norm",
            "total_norm",
            "gradient_norm",
            "train/grad_norm",
            "actor/grad_norm",
            "grad_norm/total",
        ),
        ("grad_norm", 1.0),
    ),
    **dict.fromkeys(("lr", "learning_rate", "train/lr", "train/learning_rate", "actor/lr"), ("learning_rate", 1.0)),
    **dict.fromkeys(("loss_scale", "scale"), ("loss_scale", 1.0)),
    **dict.fromkeys(
        ("tok/s", "tokens/s", "tokens_per_sec", "tokens_per_second", "tokens/sec", "wps", "perf/throughput"),
        ("tokens_per_sec", 1.0),
    ),
    **dict.fromkeys(
        ("samples/s", "samples/sec", "samples_per_second", "samples_per_sec", "sps"),
        ("samples_per_sec", 1.0),
    ),
    **dict.fromkeys(("tflops", "tflop/s", "tflops/gpu", "tflop/s/gpu", "tflops_per_gpu"), ("tflops", 1.0)),
    **dict.fromkeys(("skipped", "skipped_steps"), ("skipped_steps", 1.0)),
    **dict.fromkeys(("data_time", "data", "data_wait", "time_data"), ("data_wait_ms", 1000.0)),
}
STEP_TIME_KEYS = frozenset(
    (
        "time",
        "step_time",
        "iter_time",
        "iteration_time",
        "batch_time",
        "time/step",
        "time_per_step",
        "dt",
        "timing_s/step",
        "train_step_time",
        "step_time_ms",
        "elapsed_time_per_iteration_(ms)",
        "time_(ms)",
        "sec/step",
        "seconds",
        "step_avg",
        "step_time_s",
        "sec/tick",  # StyleGAN's ``tick 1401  kimg 5738.6  …  sec/tick 71.0``: a tick is its progress unit
    )
)
MFU_KEYS = frozenset(("mfu", "perf/mfu", "train/mfu", "mfu(%)"))
EPOCH_KEYS = frozenset(("epoch", "train/epoch"))
#: A KL term, part of an RL or distillation objective, or a loss's perplexity (``ppl``, exp of the loss): judged,
#: like a loss, for being non-finite only.
KL_KEYS = frozenset(("kl", "train/kl", "actor/kl", "objective/kl", "kl_div", "kl_loss", "ppl", "perplexity"))
#: A line that begins with its step: in brackets (``[5000] model_loss inf / value_loss 5.0``, Dreamer), or bare
#: before a ``|`` (``490 | loss 5.7543 | lr 4.9e-05 | 8060.78ms``, llama2.c), or with its total (``4/6 | Train loss:
#: 0.239 | Eval accuracy: 0.846``, an epoch loop's line).
LEADING_STEP = re.compile(r"^\s*(?:\[(\d+)\]\s|(\d+)(?:/\d+)? \|)")
#: What times an iteration or measures its throughput: with a step, a report even without a loss.
TIMED_FIELDS = ("step_time_ms", "tokens_per_sec", "samples_per_sec", "tflops")
#: A line that begins with the training loss (``loss:0.0075, accuracy:0.997``, ``Train Loss: 0.0068, Train Acc: 35.4``):
#: a training loop's own report, stepless; the order of its lines is its time axis.
LEADING_LOSS = re.compile(r"^\s*(?:train(?:ing)?[ _])?loss\s*[:=]", re.IGNORECASE)
#: Words a line of training progress holds one of (the cheap test first).
MAY_HOLD = re.compile(r"oss|OSS|step|Step|STEP|iter|Iter|kl|tick|Speed: ")
#: What separates a key's words: ``grad norm``, ``grad-norm`` and ``grad_norm`` are one key.
SEPARATORS = re.compile(r"[\s_-]+")
#: A step time longer than this (ms) is no step time (a cumulative clock, a misread unit).
MAX_STEP_MS = 3_600_000.0


def line_values(text: str, epoch: int | None = None) -> Payload | None:
    """The training payload one line of any format gives, or None (see the module docstring): a step with a loss,
    ``epoch`` the epoch a header line before it named (Keras's ``Epoch 2/20``);
    or with the iteration's own time or throughput. Evaluation values (``val loss``) are not the training loss,
    and a line of them is a report only where it also times the iteration. A non-finite loss-like value is a
    report even without a step, and even on an evaluation line: the model's numbers are gone."""
    if not _may_hold(text):
        return None
    matches = [m for m in PAIR.finditer(text) if not m["clock"]]
    pairs = [(field_key(m["key"]), m["num"], (m["unit"] or "").lower()) for m in matches]
    empty = {key.split("/", 1)[1] for key, num, _ in pairs if key.startswith("tokens/") and _number(num) == 0}
    losses = [(key, _number(num)) for key, num, _ in pairs if loss_like(key) and not _of_empty(key, empty)]
    bad = next((value for _, value in losses if not math.isfinite(value)), None)
    training = [(key, value) for key, value in losses if not EVALUATION.search(key)]
    step = _step(text, pairs, epoch)
    if step is None:
        if bad is None and LEADING_LOSS.match(text) and len(training) == len(losses) and training:
            return {"loss": training_loss(training)}  # a loop's own line, its loss first: the order is its time
        return None if bad is None else {"loss": bad}
    payload: Payload = {"global_step": step}
    loss = training_loss(training)
    if (loss := _own_loss(training, losses, matches) if loss is None else loss) is not None:
        payload["loss"] = loss
    if bad is not None:
        payload["loss"] = bad
    for key, num, unit in pairs:
        _field(payload, key, _number(num), unit)
    if "step_time_ms" not in payload:
        _rate(payload, text)
    timed = any(name in payload for name in TIMED_FIELDS)
    summary = _keras_epoch(training, losses) or _epoch_summary(text, pairs)
    if ("loss" in payload and (len(training) == len(losses) or summary)) or timed:
        return payload
    return None if bad is None else {"loss": bad}


def _of_empty(key: str, empty: set[str]) -> bool:
    """A subset's loss on a line whose tokens of that subset are none (InternEvo's ``loss/cn=nan`` beside
    ``tokens/cn=0``): the mean of nothing, no number of the model's."""
    return key.startswith("loss/") and key.split("/", 1)[1] in empty


def _own_loss(training: list[tuple[str, float]], losses: list[tuple[str, float]], matches: list) -> float | None:
    """The line's only loss where it names no primary one and that one is a single word of the script's own
    (``Mask_Loss 1.678``; not words around it: ``at step 100 with loss 2.3``)."""
    if len(training) != 1 or len(losses) != 1 or training[0][0] in KL_KEYS:
        return None
    key = training[0][0]
    return training[0][1] if any(field_key(m["key"]) == key and " " not in m["key"].strip() for m in matches) else None


def _keras_epoch(training: list[tuple[str, float]], losses: list[tuple[str, float]]) -> bool:
    """Keras's epoch line: the training ``loss`` and each evaluation loss its ``val_`` twin (``loss: 0.54 -
    val_loss: 0.29``), not an evaluation that estimates the training loss too (nanoGPT's ``train loss``)."""
    names = {key for key, _ in training}
    return "loss" in names and all(key in names or key.removeprefix("val_") in names for key, _ in losses)


def _epoch_summary(text: str, pairs: list[tuple[str, str, str]]) -> bool:
    """An epoch's summary line, numbered by its epoch alone (``epoch: 1, lr: 1.95e-05 - train loss: 1.39 - valid
    loss: 1.39``, SpeechBrain's train log): its training loss is the epoch's, the report of that epoch (a line with
    its own step beside an evaluation's losses — nanoGPT's ``step 250: train loss …, val loss …`` — is not)."""
    if any(_step_key(key) for key, _, _ in pairs) or EPOCH.search(text) is None:
        return False
    return not any(p.search(text) for p in (STEP_FRACTION, EPOCH_FRACTION, BATCH_FRACTION, LEADING_STEP))


def field_key(key: str) -> str:
    """A key as the tables name it: lower case, words joined by ``_`` (``grad norm``, ``grad-norm``, ``grad_norm``
    are one key), a closing ``is`` dropped (BigDL's ``loss is 0.1296``)."""
    return SEPARATORS.sub("_", key.strip().lower()).removesuffix("_is")


def _may_hold(text: str) -> bool:
    """The cheap test every line not claimed by a framework passes first: a loss or a step named."""
    return MAY_HOLD.search(text) is not None or (text[:1].isdigit() and " |" in text)  # llama2.c: no words


def loss_like(key: str) -> bool:
    """A loss, or a term of one (an RL objective's KL), but not the loss scale, nor the best loss a script keeps
    (``'best_train_loss': inf`` is where its record starts)."""
    return ("loss" in key and "scale" not in key and not key.startswith("best")) or key in KL_KEYS or key == "xent"


def training_loss(losses: list[tuple[str, float]]) -> float | None:
    """The training loss: the preferred primary one, made non-finite by any non-finite loss-like field."""
    primary = sorted((_PRIMARY_RANK[key], value) for key, value in losses if key in _PRIMARY_RANK)
    bad = next((value for _, value in losses if not math.isfinite(value)), None)
    if bad is not None:
        return bad
    return primary[0][1] if primary else None


def _step(text: str, pairs: list[tuple[str, str, str]], header: int | None = None) -> int | None:
    """The line's step: a step key's integer (with its total: ``N/M``), else the batch in its epoch (the line's,
    else the ``header`` epoch a line before named), else an integer epoch."""
    steps = [(key, _number(num)) for key, num, unit in pairs if _step_key(key) and unit != "%"]  # not ``Steps: 0%|``
    steps = [(key, v) for key, v in steps if math.isfinite(v) and v >= 0 and v == int(v)]
    whole = [v for key, v in steps if key in GLOBAL_STEP_KEYS or key.endswith(("global_step", "num_updates"))]
    if whole:
        return int(whole[0])
    if (match := STEP_FRACTION.search(text)) is not None:
        return int(match[1])
    if (match := EPOCH_FRACTION.search(text)) is not None and int(match[2]) <= int(match[3]):
        return int(match[1]) * int(match[3]) + int(match[2])
    if steps:
        return int(steps[0][1])
    if (match := LEADING_STEP.match(text)) is not None:
        return int(match[1] or match[2])
    epoch_match = EPOCH.search(text)
    epoch = int(epoch_match[1]) if epoch_match else header
    if (match := BATCH_FRACTION.search(text)) is not None:
        done, total = (int(match[1]), int(match[2])) if match[1] else (int(match[3]), int(match[4]))
        if done <= total:
            return done + (epoch * total if epoch is not None else 0)
    return epoch


def _step_key(key: str) -> bool:
    """A step's key: one of :data:`STEP_KEYS`, or words ending in one (``completed step``), not evaluation's."""
    if key in STEP_KEYS or key.endswith(("/global_step", "_num_updates", "_global_step")):
        return True
    last = key.rsplit("_", 1)[-1]
    return last in ("step", "iter", "iteration") and EVALUATION.search(key) is None


def _field(payload: Payload, key: str, value: float, unit: str) -> None:
    """One pair's contract field, where its key (or unit) says which."""
    if key in STEP_TIME_KEYS or unit in (
        "ms/step",
        "ms/it",
        "ms/iter",
        "ms/batch",
        "s/step",
        "s/it",
        "s/iter",
        "s/batch",
    ):
        if (ms := _step_ms(key, value, unit)) is not None:
            payload.setdefault("step_time_ms", ms)
        return
    if key in MFU_KEYS:
        if math.isfinite(value) and value >= 0:
            payload["mfu"] = value / 100.0 if unit == "%" or value > 1.0 else value
        return
    target = KEYS.get(key)
    if target is None and unit in ("tok/s", "toks/s", "tokens/s", "token/s", "tok/sec", "tokens/sec"):
        target = ("tokens_per_sec", 1.0)
    elif target is None and unit.startswith("sample"):
        target = ("samples_per_sec", 1.0)
    if target is None or value < 0 or (not math.isfinite(value) and target[0] != "grad_norm"):
        return  # a gradient norm gone NaN or infinite is the job's fault, not the line's
    name, factor = target
    if name == "skipped_steps":
        if value == int(value):
            payload.setdefault(name, int(value))
        return
    payload.setdefault(name, value * factor)


def _step_ms(key: str, value: float, unit: str) -> float | None:
    """A step time in ms from its value and unit (no unit: seconds, unless the key says ms)."""
    if not math.isfinite(value) or value <= 0:
        return None
    if unit.startswith("ms") or "ms" in key:
        ms = value
    elif unit == "it/s" or unit.startswith("step"):
        ms = 1000.0 / value
    else:
        ms = value * 1000.0
    return ms if ms <= MAX_STEP_MS else None


def _rate(payload: Payload, text: str) -> None:
    """A step time or throughput given as a bare rate (``1.23s/it``, ``4156 tok/s``)."""
    for match in RATE.finditer(text):
        value, unit = float(match["num"]), match["unit"].lower()
        if unit.startswith(("tok", "sample")):
            name = "tokens_per_sec" if unit.startswith("tok") else "samples_per_sec"
            payload.setdefault(name, value)
        elif "step_time_ms" not in payload and (ms := _step_ms("", value, unit)) is not None:
            payload["step_time_ms"] = ms


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:  # a NaN or infinity spelled otherwise (``nanxxx``, ``-nan(ind)``, ``1.#INF``)
        return -math.inf if text.startswith("-") and "INF" in text else math.inf if "INF" in text else math.nan


class GenericLines:
    """Iteration lines of any format (:func:`line_values`), one stream at a time: the reader's last resort."""

    name = "generic"

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        values = line_values(text)
        if values is None:
            return None
        values["timestamp"] = ts
        return [values]

    def flush(self) -> list[Payload]:
        return []
