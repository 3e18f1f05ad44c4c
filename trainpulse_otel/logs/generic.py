"""Iteration lines of any format: a line that carries a step and a loss is a training report.

The reader's last resort, after every framework it knows (:mod:`.frameworks`): nanoGPT's
``iter 1631: loss 4.0863, time 561.94ms, mfu 15.34%``, llm.c's ``step 1/74 | train loss 11.01 | norm 15.4 |
(123.45 ms | 4156 tok/s)``, verl's ``step:2 - … - train/loss:nan - …``, torchvision's MetricLogger
``Epoch: [0]  [ 10/500]  eta: …  loss: 2.3100 (2.4000)  time: 0.5000  data: 0.0100``, mmcv, detectron2,
timm, fairseq, RETURNN, Keras, JSON lines and a script's own ``print``. A line is cut into ``key value``
pairs (separated by ``:``, ``=`` or a space; pairs by ``,``, ``|``, `` - `` or blanks), each key read by its
meaning (:mod:`.keys`), units from the value (``ms``, ``s``, ``%``, ``s/it``, ``it/s``, ``tok/s``).

What makes a report: a step (``iter``, ``step``, ``global_step``, ``num_updates``, ``N/M``, an epoch with
its batch ``[i/N]``, else an integer epoch) and a loss. The loss is the training loss when the line names
one (:data:`.keys.PRIMARY_LOSSES`); any other loss-like field that is NaN or infinite (an RL objective, an
auxiliary loss) makes the report's loss non-finite, since a numerical fault is one wherever it shows. A
line about evaluation (``val loss``, ``eval_…``, ``test``) is no report. Pure: text in, payloads out.
"""

from __future__ import annotations

import math
import re

from .boosting import ROUND, round_values
from .keys import (
    EPISODE_KEYS,
    EVALUATION,
    GLOBAL_STEP_KEYS,
    KEYS,
    KL_KEYS,
    TIMED_FIELDS,
    Payload,
    field_key,
    loss_like,
    no_iteration,
    put_field,
    step_key,
    step_ms,
    training_loss,
)
from .lines import NCCL_ORIGIN
from .listeners import bare_values, listener_values

#: ``key value`` pairs: a key of up to four words (letters, digits, ``_./()-``; no later word a ``nan``, which is a
#: value: ``loss nan lr 0.1``), optionally quoted or bracketed (``[Loss] 5.2``), then ``:``,
#: ``=`` or a blank, then a number (thousands separators, exponent, NaN and infinities; optionally quoted, or
#: inside ``tensor(…)``, NumPy 2's ``np.float32(…)``, JAX's ``Array(…)`` / ``DeviceArray(…)``, TensorFlow's
#: ``tf.Tensor(…)`` / ``<tf.Tensor: …, numpy=…>`` or a one-value array ``[8.135595]``) and its unit; a number a letter runs on from is none (``time 1d 06h``: a duration; ``Step: 423k``, not 42). NaN as
#: consoles spell it too: PaddleOCR's ``{:x<6f}`` pads it to ``nanxxx``, MSVC's runtime writes ``-nan(ind)`` and,
#: before 2015, ``1.#QNAN`` / ``-1.#IND`` / ``1.#INF``. Julia's ``@show loss(x, y) = param(0.0913291)`` (Flux's tracked
#: number; ``87.79f0``, a Float32) and Hasktorch's ``Tensor Float []  28.61`` too.
PAIR = re.compile(
    r"(?P<key>[A-Za-z_][\w./\-]*(?:\([\w./\- %]*\)[\w./\-]*)?(?: (?!(?:nan|inf(?:inity)?)\b)[A-Za-z_][\w./\-]*"
    r"(?:\([\w./\- %]*\)[\w./\-]*)?){0,3}|[a-z]\w*\([\w, ]+\))(?:['\"]|\])?\s*(?:[:=]\s*|\s+)"
    r"(?:tensor\(|np\.float(?:16|32|64)\(|(?:Device)?Array\(|tf\.Tensor\(|<tf\.Tensor: shape=\(\), dtype=\w+, numpy="
    r"|param\(|Tensor (?:Float|Double) \[\]\s+|\[(?=[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\]))?['\"]?"
    r"(?P<num>[-+]?1\.#(?:QNAN|IND|INF)\d*|[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+(?!\d)(?:\.\d*(?!\d)|(?![.\d]))|\.\d+(?!\d))"
    r"(?:[eEf][-+]?\d+(?!\d))?|[-+]?(?:nan|inf(?:inity)?)(?:x+\b|\(ind\)|\b))"
    r"['\"]?\s?(?:(?P<unit>ms/(?:step|it(?:er)?|batch)|s/(?:step|it(?:er)?|batch)|it/s|(?:tok(?:en)?s?|samples?)/s(?:ec)?|ms|secs?|s|%)"
    r"(?![A-Za-z]))?(?-i:(?![a-z]))(?P<clock>:\d)?",  # (a capital after it begins the next line's text a paste glued on)
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
#: A batch in its epoch: ``[ 10/500]``, ``[100/1251 (  8%)]`` (MetricLogger, mmcv, timm), DGL-KE's ``[Train](2000/24000)``
#: (after a tag: prose's ``(45/50)`` is none), a bar's ``100/1000 [``, PyTorch's LM examples' ``  200/ 2983 batches``.
BATCH_FRACTION = re.compile(
    r"(?:\[|\]\()\s*(\d+)\s*/\s*(\d+)\s*[\])(]|(?:^|[\s|])(\d+)/(\d+) (?:\[|━)|(?:^|[\s|])(\d+)\s*/\s*(\d+) batches\b"
)
#: An epoch's header on a line of its own — Keras's ``Epoch 2/20`` (1.x's ``Epoch 2``), TensorFlow.js's ``Epoch 2 / 100``,
#: nnU-Net's ``epoch:  6``, a loop's own in its language (``Эпоха 1/30``, ``Época 3``) or in a banner (``=====
#: Epoch 3 =====``, trl's PPO example's ``------ STEP 0 ------``), a script training several models naming the one
#: (``SqueezeNet - Epoch 0/49``) —: the lines of its batches (or its summary's) that follow name no epoch.
EPOCH_HEADER = re.compile(
    r"^\s*(?:(?:[\w.-]+ - )?(?:Epoch|Epoche|Época|Époque|Epoka|Эпоха|エポック|에폭) ?(\d+)(?: ?/ ?\d+)?|[Ee]poch:\s+(\d+)"
    r"|[-=*#]{3,} ?(?i:epoch|step) (\d+)(?: ?/ ?\d+)? ?[-=*#]{3,})\s*$"
)
#: fairseq's progress before its ``num_updates``: ``| epoch 001  1000 / 331737 loss=9.57``, ``epoch 001:  100 / 1000``.
EPOCH_FRACTION = re.compile(r"\bepoch (\d+):?\s+(\d+) / (\d+)\b")
#: The epoch: ``Epoch: [2]``, ``Epoch [1][…]``, ``Epoch(train) [1]``, ``epoch 001``, ``Train: 3 [``, ``"epoch": 4``,
#: a variable's name for it (``num_epoch: 1``, ``cur_epoch=3``).
EPOCH = re.compile(
    r"\b(?:(?:cur|current|num|n)_)?(?:epoch(?:\(train\))?|train:)['\"]?\s*[:=]?\s*\[?\s*(\d+)\b", re.IGNORECASE
)

#: A line that begins with its step: in brackets (``[5000] model_loss inf / value_loss 5.0``, Dreamer), or bare
#: before a ``|`` (``490 | loss 5.7543 | lr 4.9e-05 | 8060.78ms``, llama2.c), or with its total (``4/6 | Train loss:
#: 0.239 | Eval accuracy: 0.846``, an epoch loop's line), as llm.c's log file writes it (``s:100 trl:3.2810``), or
#: bare before its training loss (Sonnet's VQ-VAE example: ``800 train loss: 0.153761 recon_error: 0.119``).
LEADING_STEP = re.compile(r"^\s*(?:\[(\d+)\]\s|(\d+)(?:/\d+)? \||s:(\d+) |(\d+) (?=(?:train(?:ing)? )?loss\b))")
#: PyTorch's tutorials' ``[epoch, batch]`` (``[1,  2000] loss: 2.197``): the batch counts within its epoch.
EPOCH_BATCH = re.compile(r"^\s*\[\s*(\d+),\s*(\d+)\]\s")
#: A line that begins with the training loss (``loss:0.0075, accuracy:0.997``, ``Train Loss: 0.0068, Train Acc: 35.4``)
#: or with a training label (DJL's ``Train: Accuracy: 0.92, SoftmaxCrossEntropyLoss: 0.27``): a training loop's own
#: report, stepless, as is a line with a loss and its learning rate (``step_loss : 9.0  learning_rate : 1.6e-05``);
#: the order of its lines is its time axis. Julia's ``@show`` of the loss function (``loss(x, y) = 0.09``) too.
LEADING_LOSS = re.compile(r"^\s*(?:(?:train(?:ing)?[ _])?loss(?:\([\w, ]+\))?\s*[:=]|train(?:ing)?\s*:)", re.IGNORECASE)
#: What a loop that prints no loss prints beside its step: an RL agent's reward or return, a classifier's accuracy,
#: an evolution strategy's score (ML-Agents' ``Step: 10000. Time Elapsed: 20.5 s. Mean Reward: 1.2``, ``Episode 10
#: Timestep 2000  Reward 12``, EvoJAX's ``Iter=10, #tests=128, score.avg=998.41``, trl's ``rewards/mean: 0.25``), a
#: regression's error (``362/362 - mean: 3.54 - mean_absolute_error: 0.66`` under ``Epoch 1/5``), a network's training
#: error (brain.js's ``iterations: 10, training error: 0.0559``).
PROGRESS = re.compile(
    r"(?:^|[_./])(?:rewards?|returns?|acc(?:uracy)?|score|mae|r?mse|(?:mean_)?(?:absolute|squared)_error|error)"
    r"(?:[_./](?:avg|mean|best))?$"
)
#: The split a loss's name begins with (:func:`_twin`).
TWIN_PREFIX = re.compile(r"^(?:train(?:ing)?|val(?:id(?:ation)?)?|eval(?:uation)?|test|dev)[_/]")
#: Words a line of training progress holds one of (the cheap test first).
MAY_HOLD = re.compile(
    r"oss|OSS|step|Step|STEP|iter|Iter|kl|tick|Speed: |poch|POCH|cost|pisode|eward|ccuracy|_error|xamples/sec"
)


#: A loss beside its running average, the average non-finite (``siammask_loss: 6.079290 (nan)``, MetricLogger's and
#: AverageMeter's ``value (average)``): a NaN or infinity entered the average, so one of the losses it took was one.
RUNNING_NONFINITE = re.compile(
    r"(?P<key>[A-Za-z_][\w./-]*)['\"]?\s*[:=]\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*\((?P<average>[-+]?(?:nan|inf))\)",
    re.IGNORECASE,
)


def _running_nonfinite(text: str) -> float | None:
    """The non-finite running average of a loss on ``text`` (:data:`RUNNING_NONFINITE`), or None."""
    for match in RUNNING_NONFINITE.finditer(text):
        if loss_like(field_key(match["key"])):
            return float(match["average"])
    return None


def line_values(text: str, epoch: int | None = None, stepless: bool = True) -> Payload | None:
    """The training payload one line of any format gives, or None (see the module docstring): a step with a loss,
    ``epoch`` the epoch a header line before it named (Keras's ``Epoch 2/20``);
    or with the iteration's own time or throughput; or a loop's own stepless line (:data:`LEADING_LOSS`) where
    ``stepless`` (in a stream whose lines number their steps, a summary's stepless line is none). Evaluation values
    (``val loss``) are not the training loss, and a line of them is a report only where it also times the iteration. A non-finite loss-like value is a
    report even without a step, and even on an evaluation line: the model's numbers are gone."""
    if not _may_hold(text):
        return round_values(text) or bare_values(text)  # (a boosting round's line names neither, nor makemore's)
    if no_iteration(text):
        return None  # a best loss leaving its ``inf`` (the record's news), the settings echoed
    if (said := listener_values(text)) is not None:
        return said
    if "] Iteration:" in text and (said := round_values(text)) is not None:
        return said  # (LightGBM's command line names an iteration: a boosting round's line)
    matches = [m for m in PAIR.finditer(text) if not m["clock"]]
    pairs = [(field_key(m["key"]), m["num"], (m["unit"] or "").lower()) for m in matches]
    empty = {key.split("/", 1)[1] for key, num, _ in pairs if key.startswith("tokens/") and _number(num) == 0}
    losses = [(key, _number(num)) for key, num, _ in pairs if loss_like(key) and not _of_empty(key, empty)]
    bad = next((value for _, value in losses if not math.isfinite(value)), None)
    if bad is None and "(" in text:
        bad = _running_nonfinite(text)
    training = [(key, value) for key, value in losses if not EVALUATION.search(key)]
    step = _step(text, pairs, epoch)
    if step is None:
        if bad is not None:
            return {"loss": bad}
        own = _stepless_loss(text, pairs, training, losses, matches) if stepless else None
        return None if own is None else {"loss": own}
    payload: Payload = {"global_step": step}
    loss = training_loss(training)
    if (loss := _own_loss(training, losses, matches) if loss is None else loss) is not None:
        payload["loss"] = loss
    if bad is not None:
        payload["loss"] = bad
    for key, num, unit in pairs:
        put_field(payload, key, _number(num), unit)
    if "step_time_ms" not in payload:
        _rate(payload, text)
    timed = any(name in payload for name in TIMED_FIELDS)
    summary = _twins_only(training, losses) or _epoch_summary(text, pairs)
    if ("loss" in payload and (len(training) == len(losses) or summary)) or timed:
        return payload
    progress = any(PROGRESS.search(key) and not EVALUATION.search(key) for key, _, _ in pairs)
    if "loss" not in payload and bad is None and (progress or (len(training) > 1 and _own_words(training, matches))):
        return {"global_step": step}  # its step, by its reward or accuracy, or losses of its own none the loss
    return None if bad is None else {"loss": bad}


def _stepless_loss(text: str, pairs: list, training: list, losses: list, matches: list) -> float | None:
    """The training loss of a loop's own line that numbers no step (:data:`LEADING_LOSS`, or a loss beside its
    learning rate), with no evaluation's loss on it — but its twins on a record naming its learning rate (DETR's
    ``log.txt``: ``{"train_lr": …, "train_loss": 25.99, …, "test_loss": 23.1, …}``); else None."""
    rate = any(KEYS.get(key, ("",))[0] == "learning_rate" for key, _, _ in pairs)
    if not training or (len(training) != len(losses) and not (rate and _twins_only(training, losses))):
        return None
    if LEADING_LOSS.match(text) is None and not rate:
        return None
    loss = training_loss(training)
    return _own_loss(training, losses, matches) if loss is None else loss


def _of_empty(key: str, empty: set[str]) -> bool:
    """A subset's loss on a line whose tokens of that subset are none (InternEvo's ``loss/cn=nan`` beside
    ``tokens/cn=0``): the mean of nothing, no number of the model's."""
    return key.startswith("loss/") and key.split("/", 1)[1] in empty


def _own_loss(training: list[tuple[str, float]], losses: list[tuple[str, float]], matches: list) -> float | None:
    """The line's only loss where it names no primary one and that one is a single word of the script's own
    (``Mask_Loss 1.678``; not words around it: ``at step 100 with loss 2.3``)."""
    if len(training) != 1 or (len(losses) != 1 and not _twins_only(training, losses)) or training[0][0] in KL_KEYS:
        return None  # (beside it, only its evaluation twins: ``train_loss_total=0.79  eval_loss_total=0.64``)
    key = training[0][0]
    return training[0][1] if any(field_key(m["key"]) == key and " " not in m["key"].strip() for m in matches) else None


def _own_words(training: list[tuple[str, float]], matches: list) -> bool:
    """Whether every training loss on the line is a single word of the script's own (``act_loss``, ``d_loss``), or
    one word before ``loss`` (MONAI's ``recons loss``; not prose's ``with loss``)."""
    own = {field_key(m["key"]) for m in matches if _own_name(m["key"].strip())}
    return all(key in own for key, _ in training)


#: Words before ``loss`` that make a phrase, not a loss's name.
PROSE = frozenset(("with", "at", "the", "a", "an", "of", "and", "or", "to", "in", "on", "for", "is", "was", "my"))


def _own_name(key: str) -> bool:
    if " " not in key:
        return True
    first, _, rest = key.partition(" ")
    return rest.lower() == "loss" and first.isalpha() and first.lower() not in PROSE


def _twins_only(training: list[tuple[str, float]], losses: list[tuple[str, float]]) -> bool:
    """An epoch's or an interval's line of the training loss and each evaluation loss its twin: Keras's ``loss: 0.54
    - val_loss: 0.29``, ``Train loss 0.872, Val loss 0.944`` (LLMs-from-scratch), ``train_loss_total=0.79
    eval_loss_total=0.64``; nanoGPT's ``step 250: train loss 4.04, val loss 4.04`` too (the train loss an
    evaluation estimates, at the step the iterations' own lines report too: one report)."""
    names = {_twin(key) for key, _ in training}
    return len(names) == len(training) and all(_twin(key) in names for key, _ in losses)


def _twin(key: str) -> str:
    """A loss's name without the split it is of (``val_loss``, ``train/loss``, ``eval_loss_total``: ``loss``…)."""
    return TWIN_PREFIX.sub("", key, count=1)


def _epoch_summary(text: str, pairs: list[tuple[str, str, str]]) -> bool:
    """An epoch's summary line, numbered by its epoch alone (``epoch: 1, lr: 1.95e-05 - train loss: 1.39 - valid
    loss: 1.39``, SpeechBrain's train log): its training loss is the epoch's, the report of that epoch (a line with
    its own step beside an evaluation's losses — nanoGPT's ``step 250: train loss …, val loss …`` — is not)."""
    if any(step_key(key) for key, _, _ in pairs) or EPOCH.search(text) is None:
        return False
    return not any(p.search(text) for p in (STEP_FRACTION, EPOCH_FRACTION, BATCH_FRACTION, LEADING_STEP))


def library_chatter(text: str) -> bool:
    """Whether ``text`` is a library's line that never reports progress: NCCL's INFO lines, its own prefix first (a
    bar a terminal glued before the prefix is not one)."""
    if " NCCL INFO " not in text or (match := NCCL_ORIGIN.match(text)) is None:
        return False
    return text.startswith("NCCL INFO ", match.end())


def _may_hold(text: str) -> bool:
    """The cheap test a line no framework claimed passes first: a loss or a step named (no boosting round's line)."""
    return (
        (MAY_HOLD.search(text) is not None and (text[:1] != "[" or ROUND.match(text) is None))
        or (text[:1].isdigit() and " |" in text)  # llama2.c: no words
        or (text[:2] == "s:" and " trl:" in text)  # llm.c's log file
    )


def _step(text: str, pairs: list[tuple[str, str, str]], header: int | None = None) -> int | None:
    """The line's step: a step key's integer (with its total: ``N/M``), else the batch in its epoch (the line's,
    else the ``header`` epoch a line before named), else an integer epoch."""
    steps = [(key, _number(num)) for key, num, unit in pairs if step_key(key) and unit != "%"]  # not ``Steps: 0%|``
    steps = [(key, v) for key, v in steps if math.isfinite(v) and v >= 0 and v == int(v)]
    steps.sort(key=lambda kv: kv[0] in EPISODE_KEYS)  # an episode's number last: ``Episode 10  Timestep 2000``
    whole = [v for key, v in steps if key in GLOBAL_STEP_KEYS or key.endswith(("global_step", "num_updates"))]
    if whole:
        return int(whole[0])
    if (match := STEP_FRACTION.search(text)) is not None:
        named = [v for key, v in steps if key == "step"]
        if named and not match[0].lower().startswith("step"):
            return int(named[0])  # the run's step beside an epoch's iteration (``iter[ 14/ 15] | … | [step]    89``)
        return int(match[1])
    if (match := EPOCH_FRACTION.search(text)) is not None and int(match[2]) <= int(match[3]):
        return int(match[1]) * int(match[3]) + int(match[2])
    if steps:
        return int(steps[0][1])
    if (match := LEADING_STEP.match(text)) is not None:
        return int(match[1] or match[2] or match[3] or match[4])
    if (match := EPOCH_BATCH.match(text)) is not None:
        return int(match[2])  # (the stream's reader counts the epochs before it: :class:`GenericLines`)
    epoch_match = EPOCH.search(text)
    epoch = int(epoch_match[1]) if epoch_match else header
    if (match := BATCH_FRACTION.search(text)) is not None:
        done, total = next((int(match[i]), int(match[i + 1])) for i in (1, 3, 5) if match[i] is not None)
        if done <= total:
            return done + (epoch * total if epoch is not None else 0)
    return epoch


def _rate(payload: Payload, text: str) -> None:
    """A step time or throughput given as a bare rate (``1.23s/it``, ``4156 tok/s``)."""
    for match in RATE.finditer(text):
        value, unit = float(match["num"]), match["unit"].lower()
        if unit.startswith(("tok", "sample")):
            name = "tokens_per_sec" if unit.startswith("tok") else "samples_per_sec"
            payload.setdefault(name, value)
        elif "step_time_ms" not in payload and (ms := step_ms("", value, unit)) is not None:
            payload["step_time_ms"] = ms


def _number(text: str) -> float:
    digits = text.replace(",", "")
    if "f" in digits and digits[-1:].isdigit():
        digits = digits.replace("f", "e")  # Julia's Float32: ``87.79f0``, ``5.76f-6``
    try:
        return float(digits)
    except ValueError:  # a NaN or infinity spelled otherwise (``nanxxx``, ``-nan(ind)``, ``1.#INF``)
        return -math.inf if text.startswith("-") and "INF" in text else math.inf if "INF" in text else math.nan


class GenericLines:
    """Iteration lines of any format (:func:`line_values`), one stream at a time: the reader's last resort."""

    name = "generic"

    def __init__(self) -> None:
        self._batches = EpochBatches()

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        values = line_values(text)
        if values is None:
            return None
        return [{**(self._batches.counted(text, values) or values), "timestamp": ts}]

    def flush(self) -> list[Payload]:
        return []


class EpochBatches:
    """One stream's steps counted within their epochs, as the run's: PyTorch's tutorials' ``[epoch, batch]``, and a
    line naming its epoch beside a step of the epoch's total (``Epoch [2/5], Step [100/600], Loss: 0.21``,
    ``Epoch: 040/040 | Batch 0150/0175 | Loss: 0.2771``) or beside a step key (Paddle's ``epoch: 1, batch_id: 20``)
    once that step starts again in a later epoch: a batch counted after the epochs before it (by the total, else by
    the last step and the lines' stride). An epoch's summary line (numbered by its epoch alone) in such a stream
    stands at the last step counted; an epoch more than one before the last starts the count again (another run in
    the file, a resume from an earlier checkpoint)."""

    def __init__(self) -> None:
        self._epoch: int | None = None
        self._before = self._batches = 0  # the batches of the epochs before, the most of this one's
        self._fraction: tuple[int, int, int | None] | None = None  # the last counted line's epoch, step and total
        self._offset = 0  # the steps of the epochs before, by the fractions' totals
        self._stride = 1  # steps between two lines of one epoch (an epoch's steps named without their total)

    def counted(self, text: str, values: Payload, parser: object = None, header: int | None = None) -> Payload | None:
        """``values`` with the run's step where ``text`` is such a line (else as they are); None where a framework
        (``parser``) numbers the stream's steps: the script's own count is not its. ``header``: the epoch a line of its
        own named before (``Epoch: 0002``), for a line that names none."""
        if text[:3].lstrip()[:1] != "[" or (match := EPOCH_BATCH.match(text)) is None:
            return self._in_epochs(text, values, header) if parser is None or _generic(parser) else values
        if parser is not None and not _generic(parser):
            return None
        epoch, batch = int(match[1]), int(match[2])
        if self._epoch is not None and epoch > self._epoch:
            self._before, self._batches = self._before + self._batches, 0
        self._epoch = epoch if self._epoch is None else max(epoch, self._epoch)
        self._batches = max(self._batches, batch)
        return {**values, "global_step": self._before + batch}

    def _in_epochs(self, text: str, values: Payload, header: int | None = None) -> Payload:
        step = values.get("global_step")
        named = EPOCH.search(text) if "poch" in text else None
        if not isinstance(step, int) or (named is None and header is None):
            return values
        epoch, fraction = (int(named[1]) if named else header), STEP_FRACTION.search(text)
        last = self._fraction
        if fraction is None and BATCH_FRACTION.search(text):
            return values  # a batch of the epoch's total: counted by its epoch already
        if fraction is None and step == epoch:  # an epoch's summary, at the last step counted
            return values if last is None else {**values, "global_step": self._offset + last[1]}
        done, total = (int(fraction[1]), int(fraction[2])) if fraction else (step, None)
        if done != step or (total is not None and done > total):
            return values  # the line's step is not its fraction's (a run's step named beside)
        if last is not None and epoch < last[0] - 1:  # another run, or a resume from an earlier epoch: counted anew
            self._offset, self._stride, last = 0, 1, None
        if last is not None and epoch > last[0] and done <= last[1]:  # the epoch's count started again
            self._offset += last[2] if last[2] is not None else last[1] + self._stride
        elif last is not None and epoch == last[0] and done > last[1]:
            self._stride = done - last[1]
        self._fraction = (max(epoch, last[0]) if last else epoch, done, total)
        return {**values, "global_step": self._offset + done}


def _generic(parser: object) -> bool:
    return getattr(parser, "name", None) == GenericLines.name
