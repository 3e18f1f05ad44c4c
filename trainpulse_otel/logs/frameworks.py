"""Iteration lines, framework by framework: each a streaming parser turning its lines into training payloads.

:data:`FRAMEWORKS` names the built-in parsers; a :class:`~.reader.LogReader` gives each stream a fresh
instance (of the framework named, or of the first that claims one of the stream's lines). Each claims only
its own lines, so the order decides nothing but ties: Megatron-LM (and its forks), torchtitan, the Hugging
Face Trainer, Lightning/NeMo, then DeepSpeed — whose engine lines appear under all but torchtitan: a stream
whose first known line is DeepSpeed's becomes the trainer's when a trainer's own line follows. A parser's
payloads are the contract's training fields, mapped by the framework's adapter (:mod:`trainpulse_otel.adapters`),
``timestamp`` the time of the line that began them. What each reads: docs/logs.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..adapters import deepspeed, hf_trainer, lightning_metrics, megatron, torchtitan
from ..adapters.deepspeed_text import SKIPPED_TOTAL, STAMP, OverflowReader, StepReader
from ..adapters.hf_trainer_text import dict_values, is_progress_bar, is_training
from ..adapters.lightning_text import APPROX_STEP, BATCH, EPOCH, progress_values
from ..adapters.megatron_text import RecordReader
from ..samples import SampleError
from .bars import progress_report
from .blocks import MetricBlockLines
from .darknet import DarknetLines
from .generic import GenericLines
from .lines import split_prefixes
from .marian import MarianLines
from .mlperf import MLPerfLines
from .sb3 import StableBaselinesLines

Payload = dict[str, Any]
#: A DeepSpeed log prefix whose message is on the next line (``[INFO] [fused_optimizer.py:382:_update_scale]``).
_BARE_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+$")
_LOSS_KEYS = ("lm loss", "lm_loss", "loss")


class DeepSpeedEngineLines:
    """DeepSpeed's own lines in any stream (the engine under Megatron-DeepSpeed, GPT-NeoX, the Trainer,
    Lightning): its numbered steps (``steps``) and its fp16 overflow events (``overflows``), each reported only
    when the trainer above does not report it itself. A step's ``skipped_steps`` is the engine's count since
    the previous numbered step, unless overflow lines have already told those skips one by one."""

    def __init__(self, steps: bool = True, overflows: bool = True) -> None:
        self.steps, self.overflows = steps, overflows
        self._steps, self._overflows = StepReader(), OverflowReader()
        self._began = 0.0  # the time of the line that began the step held
        self._skipped: int | None = None  # the engine's running skipped count at the last step reported
        self._events = 0  # overflow events since the step held began
        self._held_events = 0  # overflow events between the step before it and the step held

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        """The payloads this line completes, or None: not a DeepSpeed line."""
        if not _engine_hint(text):
            return None
        overflow, events = self._overflows.feed(text, ts)
        if overflow:
            return self._overflow_payloads(events, _own_time(text, ts))
        before, began, held_events = self._steps.current, self._began, self._held_events
        claimed, done = self._steps.feed(text)
        if not claimed:
            return [] if ("[INFO]" in text and _BARE_PREFIX.match(text)) else None
        if self._steps.current is not None and self._steps.current is not before:
            self._began, self._held_events, self._events = _own_time(text, ts), self._events, 0
        return self._step_payloads(done, began, held_events)

    def flush(self) -> list[Payload]:
        events = self._overflow_payloads(self._overflows.flush(), self._began)
        return events + self._step_payloads(self._steps.flush(), self._began, self._held_events)

    def drop_steps(self) -> None:
        """Forget the step held (a trainer's own line for it follows) and report no more steps."""
        self.steps, self._steps.current = False, None

    def _overflow_payloads(self, events: list[dict[str, Any]], ts: float) -> list[Payload]:
        self._events += len(events)
        if not self.overflows:
            return []
        return [p for event in events if (p := _translated(deepspeed.translate_record, event, ts)) is not None]

    def _step_payloads(self, record: dict[str, Any] | None, ts: float, events: int) -> list[Payload]:
        if record is None or not self.steps:
            return []
        payload = _translated(deepspeed.translate_record, record, ts)
        total = record.get(SKIPPED_TOTAL)
        if payload is not None and isinstance(total, int):
            skipped = total - self._skipped if self._skipped is not None and total >= self._skipped else None
            if skipped == 0 or (skipped is not None and not (events and self.overflows)):
                payload["skipped_steps"] = skipped
            self._skipped = total
        return [] if payload is None else [payload]


def _engine_hint(text: str) -> bool:
    """Whether ``text`` may be a DeepSpeed line: each holds one of these (the cheap test on every line)."""
    return (
        "step" in text
        or "[INFO]" in text
        or "SamplesPerSec" in text
        or "overflow" in text
        or "loss scale" in text
        or "config.py" in text
    )


def _own_time(text: str, ts: float) -> float:
    """The time stamp DeepSpeed's logger wrote inside ``text`` (after a tqdm bar, say), else ``ts``."""
    if "[20" in text and (match := STAMP.search(text)):
        return split_prefixes(text[match.start() :])[1] or ts
    return ts


class _Trainer:
    """A framework whose lines carry the training steps, with the DeepSpeed engine's lines below it (read once
    one of the framework's own lines has been seen, so a DeepSpeed-first stream is DeepSpeed's until then)."""

    name = "trainer"
    #: What of the engine this framework leaves to the engine to report: its steps, its skipped steps.
    engine_steps, engine_overflows = False, True

    def __init__(self) -> None:
        self._engine: DeepSpeedEngineLines | None = None  # made on first use: detection makes a parser per unknown line
        self.seen = False

    @property
    def engine(self) -> DeepSpeedEngineLines:
        if self._engine is None:
            self._engine = DeepSpeedEngineLines(self.engine_steps, self.engine_overflows)
        return self._engine

    def adopt(self, engine: DeepSpeedEngineLines) -> None:
        """Take over a DeepSpeed stream's engine (its loss scale, its counts) on this framework's terms."""
        engine.overflows = self.engine_overflows
        if not self.engine_steps:
            engine.drop_steps()
        self._engine, self.seen = engine, True

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        own = self.own(text, ts)
        if own is not None:
            self.seen = True
            if "[INFO]" in text:  # a DeepSpeed message glued onto the framework's own line (a tqdm bar)
                own = own + (self.engine.feed(text, ts) or [])
            return own
        if not self.seen:
            return None
        found = self.engine.feed(text, ts)
        if found is not None:
            return found
        return [] if self.quiet(text) else None

    def flush(self) -> list[Payload]:
        return (self._engine.flush() if self._engine is not None else []) + self.own_flush()

    def own(self, text: str, ts: float) -> list[Payload] | None:
        """The payloads one of this framework's own lines completes, or None: not one."""
        raise NotImplementedError

    def own_flush(self) -> list[Payload]:
        return []

    def quiet(self, text: str) -> bool:
        """Whether a line of no value is still this framework's (once one of its lines has been seen)."""
        return False


class MegatronLines(_Trainer):
    """Megatron-LM's iteration lines (every release, GPT-NeoX's and Megatron-DeepSpeed's too) and the timer
    blocks after them (:mod:`..adapters.megatron_text`). An iteration whose loss is missing from its line,
    with iterations advanced, had a NaN loss (``training_log`` prints only losses above 0)."""

    name = "megatron"
    engine_steps, engine_overflows = False, False  # the iteration line counts skipped iterations itself

    def __init__(self) -> None:
        super().__init__()
        self._records = RecordReader()
        self._began = 0.0  # the time of the iteration line held
        self._last: int | None = None  # the iteration reported last

    def own(self, text: str, ts: float) -> list[Payload] | None:
        claimed, done = self._records.feed(text)
        if not claimed:
            return None
        began = self._began
        if self._records.began:
            self._began = ts  # an iteration line: its record is held for the timers after it
        return [] if done is None else self._payload(done, began)

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if self.seen and ("[Rank" in text or "[INFO]" in text or "rank=" in text):
            found = self.engine.feed(text, ts)  # DeepSpeed's lines first: its breakdowns look like old timers
            if found is not None:
                return found
            return self.own(text, ts)
        return super().feed(text, ts)

    @property
    def holding(self) -> bool:
        """Whether it holds an iteration line a terminal's wrap cut, for the next line of its file to end."""
        return self._records.partial is not None

    def own_flush(self) -> list[Payload]:
        done = self._records.flush()
        return [] if done is None else self._payload(done, self._began)

    def _payload(self, record: dict[str, Any], ts: float) -> list[Payload]:
        step = record.get("iteration")
        advanced = step - self._last if isinstance(step, int) and self._last is not None else None
        self._last = step
        payload = _translated(megatron.translate_record, record, ts)
        if payload is not None and "loss" not in payload and _loss_was_nan(record, advanced):
            payload["loss"] = math.nan
        return [] if payload is None else [payload]


def _nonfinite_loss_term(values: Mapping[str, Any]) -> float | None:
    """A non-finite value of a dict's loss or KL term (``eval_loss``, ``kl``, ``rewards/…`` excluded), or None."""
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value) and ("loss" in key or key.endswith("kl")):
            return value
    return None


def _translated(translate: Callable[..., Any], record: Mapping[str, Any], ts: float) -> Payload | None:
    """An adapter's payload for ``record`` stamped ``ts``. A value that cannot be its field (a NaN step time)
    costs that value, not the line; None when no value is left to report."""
    for _ in range(3):
        try:
            return {**translate(record, {}).payload, "timestamp": ts}
        except SampleError as exc:
            if not exc.field or exc.field not in record:
                return None
            record = {k: v for k, v in record.items() if k != exc.field}
    return None


def _loss_was_nan(record: Mapping[str, Any], advanced_since: int | None) -> bool:
    """Whether an iteration line without any loss stands for a NaN loss: it counts NaN iterations, or its
    iterations were not all skipped (the first line of a stream: none skipped)."""
    if any(key in _LOSS_KEYS or key.endswith(" loss") for key in record):
        return False
    nan_iterations = record.get("number of nan iterations", record.get("number_of_nan_iterations"))
    skipped = record.get("number of skipped iterations", record.get("number_of_skipped_iterations"))
    if isinstance(nan_iterations, float) and nan_iterations > 0:
        return True
    if not isinstance(skipped, float):
        return False  # 2020's lines count nothing; their loss is always printed
    return (advanced_since if advanced_since is not None else 1) > skipped


class TorchtitanLines:
    """torchtitan's training lines (``step: N  loss: ...  mfu: M%``), with or without ``[rankN]:``, every rank's
    copy of a step included (the reader keeps one)."""

    name = "torchtitan"

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        values = torchtitan.line_values(text)
        if values is None:
            return [] if "[titan]" in text or text.startswith(" - root - ") else None
        payload = _translated(torchtitan.translate_record, values, ts)
        return [] if payload is None else [payload]

    def flush(self) -> list[Payload]:
        return []


class HuggingFaceLines(_Trainer):
    """The Trainer's log dicts (:mod:`..adapters.hf_trainer_text`) and, once one is seen, its tqdm bars and the
    DeepSpeed engine's lines (steps with their breakdown, overflows) when it trains with DeepSpeed."""

    name = "huggingface"
    engine_steps, engine_overflows = True, True  # the dicts name no step and count no skipped step

    trained = False  # a training dict was read: its bars are then quiet, else they are the progress

    def own(self, text: str, ts: float) -> list[Payload] | None:
        values = dict_values(text)
        if values is None:
            bar = progress_report(text) if self.seen and not self.trained and "%|" in text else None
            return None if bar is None else [{**bar, "timestamp": ts}]
        bad = _nonfinite_loss_term(values)
        if not is_training(values):  # an evaluation log: only its non-finite loss is news (the weights are)
            return [] if bad is None else [{"loss": bad, "timestamp": ts}]
        payload = _translated(lambda record, _: hf_trainer.translate(record), values, ts)
        self.trained = self.trained or (payload is not None and "loss" in payload)
        if payload is not None and bad is not None and math.isfinite(payload.get("loss", 0.0)):
            payload["loss"] = bad  # an auxiliary loss or a KL term gone non-finite: the objective is
        return [] if payload is None else [payload]

    def quiet(self, text: str) -> bool:
        return is_progress_bar(text)


class LightningLines(_Trainer):
    """Lightning's and NeMo's progress (:mod:`..adapters.lightning_text`): each step once, as its last draw
    shows it (a bar is redrawn many times per step), told when the bar moves on."""

    name = "lightning"
    engine_steps, engine_overflows = False, True

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[str, Any] | None = None
        self._began = 0.0
        self._exact: tuple[int, int, int] | None = None  # (epoch, batch, global step) of the last exact step

    def own(self, text: str, ts: float) -> list[Payload] | None:
        draws = list(progress_values(text))
        if not draws:
            return None
        out: list[Payload] = []
        for values in draws:
            held = self._held
            if held is not None and (held[EPOCH], held[BATCH]) != (values[EPOCH], values[BATCH]):
                out.extend(self.own_flush())
            if self._held is None:
                self._began = ts
            self._held = values
        return out

    def own_flush(self) -> list[Payload]:
        held, self._held = self._held, None
        if held is None or held[BATCH] == 0:
            return []
        record = {k: v for k, v in held.items() if k not in (EPOCH, BATCH, APPROX_STEP, "global_step")}
        if (step := self._step(held)) is not None:
            record["global_step"] = step
        payload = _translated(lightning_metrics.translate_bar, record, self._began)
        return [payload] if payload is not None and set(payload) - {"framework", "global_step", "timestamp"} else []

    def _step(self, held: dict[str, Any]) -> int | None:
        """The exact step; a rounded one (``2e+3``) only where the bar's advance from the last exact step
        agrees with it."""
        epoch, batch = held[EPOCH], held[BATCH]
        exact = held.get("global_step")
        if isinstance(exact, float) and exact.is_integer():
            self._exact = (epoch, batch, int(exact))
            return int(exact)
        approx = held.get(APPROX_STEP)
        if not isinstance(approx, float) or self._exact is None or self._exact[0] != epoch:
            return None
        guess = self._exact[2] + batch - self._exact[1]
        return guess if abs(guess - approx) <= 0.005 * approx else None


class DeepSpeedLines:
    """DeepSpeed's engine lines (:class:`DeepSpeedEngineLines`) in a stream of its own; when a trainer's own line follows (a
    Megatron-DeepSpeed iteration, a Trainer dict, a Lightning bar), the stream is that trainer's from then on,
    and it takes over the engine."""

    name = "deepspeed"
    #: The trainers that run on DeepSpeed, tried (in this order) on lines DeepSpeed does not claim.
    HOSTS: tuple[type[_Trainer], ...] = (MegatronLines, HuggingFaceLines, LightningLines)

    def __init__(self) -> None:
        self.engine = DeepSpeedEngineLines()
        self.host: _Trainer | None = None
        self._candidates: tuple[_Trainer, ...] = ()

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if self.host is not None:
            return self.host.feed(text, ts)
        found = self.engine.feed(text, ts)
        if found is not None:
            return found
        if not self._candidates:
            self._candidates = tuple(make() for make in self.HOSTS)
        for host in self._candidates:
            own = host.own(text, ts)  # a candidate keeps no state from lines it does not claim
            if own is not None:
                host.adopt(self.engine)
                self.host, self._candidates = host, ()
                return own
        return None

    def flush(self) -> list[Payload]:
        return self.host.flush() if self.host is not None else self.engine.flush()


#: The built-in parsers by framework name (``trainpulse replay -framework NAME``), tried in this order; the last,
#: any format's (:mod:`.generic`), only keeps a stream until a framework claims one of its lines.
FRAMEWORKS: dict[str, Callable[[], Any]] = {
    "megatron": MegatronLines,
    "torchtitan": TorchtitanLines,
    "huggingface": HuggingFaceLines,
    "lightning": LightningLines,
    "deepspeed": DeepSpeedLines,
    "marian": MarianLines,
    "darknet": DarknetLines,
    "mlperf": MLPerfLines,
    "stable-baselines3": StableBaselinesLines,
    MetricBlockLines.name: MetricBlockLines,
    GenericLines.name: GenericLines,
}
