"""Time passing with no step, as a stream's own time stamps show it.

A hung job that no watchdog ends prints no error: its log just holds no new iteration while other stamped lines
(a logger's, a health poll's, a save's, the user's ^C) keep the clock; a line that says the run is over ends it.
:class:`ProgressClock` follows one stream: the own time and step of its last progress line, the job's pace (steps a
second between progress lines), and what its lines since say it is doing (``checkpoint``: a save; ``eval``: an
evaluation). Another pass's counter moving (an evaluation's ``Test: [20/547]``, ``[30/547]``) is no silence: one is
measured from the later of the last progress and the last such move; a collective's watchdog timing out ends the
watch (the hang was that collective's). The longest silence since the last progress is held until it is known for a
stall: told when the stream ends still silent, or when progress resumes without the steps the pace would have made
meanwhile (a silence the steps crossed at their pace is lines an excerpt left out, or a log that printed less, not a
stall; the first interval between progress lines is the job's pace, not a silence). Told as the details of a
``progress_gap`` event; the stall detector judges it. Pure: times in, facts out.
"""

from __future__ import annotations

import re
from collections import deque
from statistics import median
from typing import Any

#: The shortest silence worth holding (s): below it no stall threshold can be met.
MIN_GAP_S = 10.0
#: Progress intervals the pace is the median of.
INTERVALS = 16
#: A silence that progress ends is no stall when the steps it skipped reach this share of what the pace would make.
COVERED = 0.5
#: A pass's count and its total (``Test: [20/547]``): the same total at a higher count is that pass moving.
COUNTER = re.compile(r"(\d+)\s*/\s*(\d+)")
#: What a line says the job is doing when it is not stepping.
SAVING = re.compile(
    r"sav(?:e|ing)\b.{0,40}(?:checkpoint|model|state|param|weights)|checkpoint.{0,20}sav|save_checkpoint", re.IGNORECASE
)
#: An evaluation's own words, or a held-out set's metric (GluonNLP's ``[Epoch 0] valid Loss=2.8567``, ``test
#: ppl=20.09``, ``val_loss``, ``dev acc``).
EVALUATING = re.compile(
    r"\beval(?:uat\w*)?\b|\bvalidat\w*|Running Evaluation"
    r"|\b(?:valid|val|test|dev)[ _/-]?(?:loss|ppl|perplexity|acc\w*|bleu|wer|cer|f1|auc|map|metrics?)\b",
    re.IGNORECASE,
)
#: What a line says when the run is over: a silence after it is the job's end, not a stall (MLPerf's ``run_stop``
#: record too, though an evaluation of the run's checkpoints may be stamped after it).
FINISHED = re.compile(
    r"done training|training (?:is )?(?:completed?|finished|done)|finished training|Trainer\.fit. stopped|"
    r"train_runtime|\*\*\*\*\* train metrics|max_steps=\d+. reached|max_epochs=\d+. reached|exits successfully"
    r'|"key": "run_stop"',
    re.IGNORECASE,
)
#: The scheduler ending a job (Slurm's ``*** STEP 1942963.1 ON node CANCELLED AT …``, at its time limit, a user's
#: ``scancel`` or cut before its reason; PBS's walltime, LSF's ``TERM_RUNLIMIT``): after a line that said the run is
#: over, the job was still running — it hung on its way out.
SCHEDULER_END = re.compile(
    r"\*\*\* (?:JOB|STEP) [\w.+]+ ON\b|DUE TO TIME LIMIT|walltime \S+ exceeded limit|TERM_RUNLIMIT"
)


class ProgressClock:
    """One stream's progress, by its lines' own time stamps (see the module docstring)."""

    __slots__ = ("_counter", "_ended", "_intervals", "_last", "_moved", "_pace", "_pending", "_phase", "_step")

    def __init__(self) -> None:
        self._last: float | None = None  # own time of the last progress line
        self._step: int | None = None
        self._intervals: deque[float] = deque(maxlen=INTERVALS)  # s between progress lines
        self._pace: deque[float] = deque(maxlen=INTERVALS)  # steps a second between progress lines
        self._phase: str | None = None
        self._pending: dict[str, Any] | None = None  # the silence held since the last progress
        self._ended: float | None = None  # when a line said the run is over
        self._counter: tuple[int, int] | None = None  # the last other pass's count and total since the last progress
        self._moved: float | None = None  # own time that count last moved

    def progress(self, own_ts: float, step: int | None) -> dict[str, Any] | None:
        """A progress line written at ``own_ts`` (of ``step``, None where the lines number none): the silence it
        ends, when the steps did not cross it; else None."""
        told = self._pending
        if told is not None and (not self._intervals or self._covered(step, told["gap_s"])):
            told = None  # the first interval is a slow job's step, no silence to judge by
        if self._last is not None and own_ts > self._last:
            self._intervals.append(own_ts - self._last)
            if step is not None and self._step is not None and step > self._step and self._pending is None:
                self._pace.append((step - self._step) / (own_ts - self._last))
        self._last, self._step, self._phase, self._pending, self._ended = own_ts, step, None, None, None
        self._counter = self._moved = None
        return told

    def line(self, own_ts: float, text: str) -> None:
        """Any other stamped line: the silence since the last progress grows to it. After a line that said the run
        is over, only the scheduler ending it says something: the job did not exit (phase ``exit``)."""
        if self._ended is not None:
            if own_ts - self._ended >= MIN_GAP_S and SCHEDULER_END.search(text) is not None:
                self._pending = self._gap(self._ended, own_ts, text) | {"phase": "exit"}
            return
        if FINISHED.search(text) is not None:
            self._pending, self._ended = None, own_ts
            return
        if self._last is None:
            return
        if self._phase is None and (SAVING.search(text) or EVALUATING.search(text)):
            self._phase = "checkpoint" if SAVING.search(text) else "eval"
        self._count(own_ts, text)
        since = self._last if self._moved is None else self._moved
        gap = own_ts - since
        if gap < MIN_GAP_S or (self._pending is not None and gap <= self._pending["gap_s"]):
            return
        self._pending = self._gap(since, own_ts, text)
        if self._intervals:
            self._pending["interval_s"] = round(median(self._intervals), 3)
        if self._phase is not None:
            self._pending["phase"] = self._phase

    def caught(self, own_ts: float) -> None:
        """A watchdog's timeout ended the silence (at ``own_ts``): the hang was the collective's, told as that
        timeout, not a stall; the lines after it are the job's end."""
        self._pending, self._ended = None, own_ts

    def _count(self, own_ts: float, text: str) -> None:
        """Another pass's counter: where it moved (same total, higher count), the job was not silent."""
        if (counted := COUNTER.search(text)) is None:
            return
        count, total = int(counted[1]), int(counted[2])
        if self._counter is not None and self._counter[1] == total and count > self._counter[0]:
            self._moved = own_ts
        self._counter = (count, total)

    def _gap(self, since: float, own_ts: float, text: str) -> dict[str, Any]:
        return {"since": since, "gap_s": round(own_ts - since, 3), "last_step": self._step, "line": text.strip()}

    def flush(self) -> dict[str, Any] | None:
        """The silence the stream ended in (the log stops there), or None."""
        told, self._pending = self._pending, None
        return told

    def _covered(self, step: int | None, gap_s: float) -> bool:
        if step is None or self._step is None:
            return False
        if not self._pace:
            return step - (self._step or 0) > 1  # no pace yet: steps skipped at all say lines were left out
        return step - (self._step or 0) >= COVERED * median(self._pace) * gap_s
