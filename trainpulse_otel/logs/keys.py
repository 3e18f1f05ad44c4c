"""What a key of an iteration line means: the training loss by its names, the step's keys, each contract field's.

The tables :mod:`.generic` and :mod:`.tables` read a line's ``key value`` pairs by: a key as the tables name it
(:func:`field_key`: lower case, words joined by ``_``), the training loss among a line's losses
(:data:`PRIMARY_LOSSES`, :func:`training_loss`), a step's keys, and the contract field each other key (or its
unit) gives (:func:`put_field`). Pure.
"""

from __future__ import annotations

import math
import re
from typing import Any

Payload = dict[str, Any]

#: Words that make a key (or a line) evaluation's, not training's.
EVALUATION = re.compile(r"\b(?:val(?:id(?:ation)?)?|eval(?:uation)?|test)(?:\b|_|/)", re.IGNORECASE)
#: The training loss by name, in the order preferred when a line names several.
PRIMARY_LOSSES = (
    "loss",
    "train_loss",
    "train/loss",
    "main/loss",  # Chainer's updater reports its model's loss so (ESPnet 1: beside main/loss_ctc, main/loss_att)
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
    "cost",  # the older name: GloVe's ``iter: 001, cost: 0.071355``, TF 1 tutorials' ``Epoch: 0001 cost= 0.52``
    "train_cost",
    "ce",  # CNTK's cross-entropy: ``Finished Epoch[ 2 of 8]: [Training] ce = 0.10104186 * 36001``
    "nll",
    "trl",  # llm.c's log file (``-o``'s main.log): ``s:100 trl:3.2810 lr:0.000600 norm:0.31``, ``s:100 tel:3.29``
)
_PRIMARY_RANK = {name: i for i, name in enumerate(PRIMARY_LOSSES)}
#: A loss named with the words that qualify it (``Epoch avg loss: 0.0549``, ``step_loss : 9.0``, ``parameter update
#: loss :65.7``): the training loss where the line names no primary one.
QUALIFIED_LOSS = re.compile(
    r"(?:(?:epoch|avg|average|mean|running|smoothed|ema|batch|step|iter|train|training|parameter|update|all)_)+loss"
)
#: Names that are a loss without saying ``loss``.
LOSS_NAMES = frozenset(("xent", "cost", "train_cost", "ce", "nll", "trl", "cross_entropy", "crossentropy"))

#: A throughput in tokens, as a unit or at a key's end.
TOKEN_RATES = ("tok/s", "toks/s", "tokens/s", "token/s", "tok/sec", "tokens/sec")

#: Keys of the step counted over the whole run, preferred to the others (an epoch's own step, a batch index).
GLOBAL_STEP_KEYS = ("global_step", "globalstep", "trainer/global_step", "num_updates", "train/step")
STEP_KEYS = frozenset(
    (
        "iter",
        "iters",
        "iteration",
        "iterations",  # brain.js: ``iterations: 10, training error: 0.0559``
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
        "batch_id",  # Paddle's loops: ``epoch: 0, batch_id: 20, loss is: [0.96]`` (counted within the epoch)
        "batch_idx",
        "tick",
        "timestep",  # an RL loop's environment steps: ``Episode 10  Timestep 2000  Reward 12``
        "timesteps",
        "episode",  # an RL loop's episodes, where nothing else counts its progress (:data:`EPISODE_KEYS`)
        "episodes",
    )
)
#: Step keys that count episodes, a step only where the line names no other.
EPISODE_KEYS = frozenset(("episode", "episodes"))
#: Contract field and the factor to it, by key; step times are resolved apart (their unit varies).
KEYS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(
        (
            "grad_norm",
            "gnorm",
            "grad",  # SCNet's ``Train Summary | Epoch 1 | Loss=0.2242 | Grad=9164.2812``
            "norm",
            "total_norm",
            "gradient_norm",
            "train/grad_norm",
            "actor/grad_norm",
            "grad_norm/total",
        ),
        ("grad_norm", 1.0),
    ),
    **dict.fromkeys(
        ("lr", "learning_rate", "train/lr", "train/learning_rate", "actor/lr", "train_lr"), ("learning_rate", 1.0)
    ),
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
        "iter_dt",
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
#: Steps a second (Bagel's ``Train Steps/Sec: 0.04``): the step time's reciprocal. Not the Trainer's run summary
#: ``train_steps_per_second``, a whole run's mean.
STEP_RATE_KEYS = frozenset(("steps/s", "steps/sec", "train_steps/sec", "steps_per_sec", "iters/s", "iters/sec"))
MFU_KEYS = frozenset(("mfu", "perf/mfu", "train/mfu", "mfu(%)"))
#: A KL term, part of an RL or distillation objective, or a loss's perplexity (``ppl``, exp of the loss): judged,
#: like a loss, for being non-finite only.
KL_KEYS = frozenset(("kl", "train/kl", "actor/kl", "objective/kl", "kl_div", "kl_loss", "ppl", "perplexity"))
#: What times an iteration or measures its throughput: with a step, a report even without a loss.
TIMED_FIELDS = ("step_time_ms", "tokens_per_sec", "samples_per_sec", "tflops")
#: A function call's arguments closing a key: ``loss(x, y)``, ``accuracy(m, x, label, 0:9)``.
CALL_ARGUMENTS = re.compile(r"\((?:[\w.:]+, )+[\w.:]+\)$")
#: What separates a key's words: ``grad norm``, ``grad-norm`` and ``grad_norm`` are one key.
SEPARATORS = re.compile(r"[\s_-]+")
#: A step time longer than this (ms) is no step time (a cumulative clock, a misread unit).
MAX_STEP_MS = 3_600_000.0


#: A best value's record leaving its starting sentinel: ``Validation loss decreased (inf --> 1.221989).  Saving
#: model ...`` (the checkpoint-on-improvement loop of PyTorch's course notebooks), ``Loss Decreased: inf => 1.22``,
#: Keras's ``ModelCheckpoint``/``EarlyStopping`` (``Epoch 1: val_loss improved from inf to 1.50455, saving model to …``).
RECORD_START = re.compile(r"\b(?:inf|nan)\b\)?\s*(?:-+>|=+>|→|to)\s*\(?[-+]?\d", re.IGNORECASE)


#: A program's settings echoed as it starts: argparse's ``Namespace(lr=20, annealing_loss_improvement_pct=1.0, …)``.
SETTINGS_ECHO = re.compile(r"^\s*Namespace\(\w+=")


def record_start(text: str) -> bool:
    """Whether a line tells a record leaving its sentinel (:data:`RECORD_START`): its ``inf`` is no loss of the run."""
    return (">" in text or "→" in text or " to " in text) and RECORD_START.search(text) is not None


def no_iteration(text: str) -> bool:
    """Whether a line's numbers, however like an iteration's, are none: a record leaving its sentinel, or the
    settings echoed (:data:`SETTINGS_ECHO`: a ``loss_weight=1.0`` there is no loss, an ``lr`` no learning rate)."""
    return record_start(text) or ("Namespace(" in text and SETTINGS_ECHO.match(text) is not None)


def field_key(key: str) -> str:
    """A key as the tables name it: lower case, words joined by ``_`` (``grad norm``, ``grad-norm``, ``grad_norm``
    are one key), a closing ``is`` dropped (BigDL's ``loss is 0.1296``), a call's arguments (Julia's ``@show loss(x,
    y)``) too."""
    if key.endswith(")") and "," in key:
        key = CALL_ARGUMENTS.sub("", key)
    return SEPARATORS.sub("_", key.strip().lower()).removesuffix("_is")


def loss_like(key: str) -> bool:
    """A loss, or a term of one (an RL objective's KL), but not the loss scale, nor the best loss a script keeps
    (``'best_train_loss': inf`` is where its record starts)."""
    return ("loss" in key and "scale" not in key and not key.startswith("best")) or key in KL_KEYS or key in LOSS_NAMES


def training_loss(losses: list[tuple[str, float]]) -> float | None:
    """The training loss: the preferred primary one, made non-finite by any non-finite loss-like field."""
    ranked = (
        (_PRIMARY_RANK.get(key, len(PRIMARY_LOSSES) if QUALIFIED_LOSS.fullmatch(key) else None), v) for key, v in losses
    )
    primary = sorted((rank, value) for rank, value in ranked if rank is not None)
    bad = next((value for _, value in losses if not math.isfinite(value)), None)
    if bad is not None:
        return bad
    return primary[0][1] if primary else None


#: Words before ``steps`` that make it a total or a setting, not the step reached (``total_steps``, ``max_steps``).
TOTALS = frozenset(("total", "max", "num", "n", "warmup", "eval", "save", "log", "logging", "trainer", "config"))


def step_key(key: str) -> bool:
    """A step's key: one of :data:`STEP_KEYS`, or words ending in one (``completed step``, ``Training steps``), not
    evaluation's nor a total's."""
    if key in STEP_KEYS or key.endswith(("/global_step", "_num_updates", "_global_step")):
        return True
    last = key.rsplit("_", 1)[-1]
    counted = last in ("step", "iter", "iteration") or (
        last in ("steps", "iterations") and TOTALS.isdisjoint(re.split(r"[_./]", key))
    )
    return counted and EVALUATION.search(key) is None


def put_field(payload: Payload, key: str, value: float, unit: str) -> None:
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
        if (ms := step_ms(key, value, unit)) is not None:
            payload.setdefault("step_time_ms", ms)
        return
    if key in STEP_RATE_KEYS:
        if (ms := step_ms(key, value, "it/s")) is not None:
            payload.setdefault("step_time_ms", ms)
        return
    if key in MFU_KEYS:
        if math.isfinite(value) and value >= 0:
            payload["mfu"] = value / 100.0 if unit == "%" or value > 1.0 else value
        return
    target = KEYS.get(key)
    if target is None and (unit in TOKEN_RATES or key.endswith(TOKEN_RATES)):  # ``Target tokens/s 1307`` too
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


def step_ms(key: str, value: float, unit: str) -> float | None:
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
