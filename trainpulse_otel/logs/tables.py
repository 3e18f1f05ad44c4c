"""Iteration tables: a header line naming the columns, then one row of numbers per epoch or interval.

Frameworks that print a table instead of ``key value`` pairs: fastai's (``epoch  train_loss  valid_loss  time``),
Chainer's ``PrintReport`` (``epoch  main/loss  validation/main/loss  elapsed_time``), spaCy's console logger (``E
#    LOSS TOK2VEC    LOSS TAGGER  TAG_ACC``), Ultralytics YOLO (``Epoch  GPU_mem  box_loss  cls_loss  dfl_loss
Instances  Size``, each row ``1/20  1.19G  1.018  3.009  1.465  2  640: 100% …``), YOLOv5 (``… box  obj  cls  total
…``), Vowpal Wabbit's progressive validation. A header is a line of three or more word cells, two or more blanks
apart, one of them a step or a loss; a row has a number (``1/20``, ``1.19G``, ``86.20``) for every column; a
tab-separated table's too (ChainerRL's ``scores.txt``: ``steps  episodes  elapsed  mean … average_loss_policy``). A
header naming neither (an evaluation's ``Class  Images  P  R``) closes the table before it. Pure: lines in, payloads
out.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass

from .keys import EVALUATION, PRIMARY_LOSSES, Payload, field_key, loss_like

#: Cells of a header: runs of two or more blanks (or a tab) apart.
CELL_GAP = re.compile(r"\s{2,}|\t")
#: A table's rules between its cells: Markdown's and tabulate's ``|``, rich's box drawing.
RULES = "|│┃"
RULE = re.compile(r"[|│┃]")
#: A CSV header: three or more names, commas and nothing else between them.
CSV_HEADER = re.compile(r"^[A-Za-z][\w/.()@%-]*(?:,[A-Za-z][\w/.()@%-]*){2,}$")

#: A header's cell: a name (letters first, or spaCy's ``#`` and ``E``; nolearn's ratio ``Train / Val``), no number.
HEADER_CELL = re.compile(r"^(?:#|[A-Za-z][\w/.()@%-]*(?: [A-Za-z][\w/.()-]*| / [A-Za-z][\w.()-]*)?)$")
#: A row's cell: a number, with a unit suffix (``1.19G``, ``45%``) or its total (``1/20``), or a clock (fastai's ``time``
#: column: ``00:07``).
ROW_CELL = re.compile(
    r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[KMGT]i?B?|%|/\d+)?:?$|^\d{1,2}:\d\d(?::\d\d)?$"
    r"|^\[\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\]$"  # a one-value array, as NumPy prints it (ChainerRL)
    r"|^[-+]?(?:nan|inf)$"  # a value gone non-finite
)
#: A header's cells and a row's, with where they stand.
HEADER_WORD = re.compile(r"\S+(?: \S+)*")
ROW_WORD = re.compile(r"\S+")
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: Columns that count the steps or the epochs.
STEP_COLUMNS = ("global_step", "step", "steps", "iteration", "iter", "#", "updates")
EPOCH_COLUMNS = ("epoch", "e")
#: Vowpal Wabbit's progressive-validation table, its header's second line (under ``average  since  example  example
#: current …``), and the columns the two lines name: the example counter is the step. Its losses are averages over
#: the examples seen so far, the first of one example, two, four (zero until one is wrong): progress, not a level.
VW_HEADER = "loss last counter weight label predict features"
VW_COLUMNS = ("average_loss", "since_last", "step", "example_weight", "current_label", "current_predict", "features")
#: YOLOv5's loss terms, its columns' names without ``loss`` (``Epoch  gpu_mem  box  obj  cls  labels  img_size``, its
#: total column dropped in 2021): two of them make a table's losses.
YOLO_TERMS = frozenset(("box", "obj", "cls", "seg"))
#: A column that sums a table's losses where no column says ``loss`` (YOLOv5's ``box  obj  cls  total``).
TOTAL_COLUMNS = ("total", "total_loss")


@dataclass(frozen=True, slots=True)
class Table:
    """A header's columns, as :func:`.keys.field_key` names them."""

    columns: tuple[str, ...]
    starts: tuple[int, ...] = ()  # where each column's name starts on the header line
    delimiter: str = ""  # ``|`` for a table drawn with rules, ``,`` for CSV; blanks and tabs otherwise
    progress_only: bool = False  # its rows are steps, their losses no level to judge (Vowpal Wabbit's)
    names: tuple[str, ...] = ()  # a ruled header's own cells, for a second header line to complete (MATLAB's)

    def row(self, text: str) -> Payload | None:
        """The payload a row gives (``global_step`` and ``loss``), or None when ``text`` is no row of it. A row with
        fewer cells than columns is read by where its cells stand under the header (Chainer's ``PrintReport`` leaves
        the validation columns blank between evaluations)."""
        if self.delimiter:
            return self._delimited(text)
        cells = text.split("\t") if "\t" in text else text.split()  # a tab-separated table's cells hold blanks
        if len(cells) < len(self.columns):
            return self._aligned(text)
        values: dict[str, float] = {}
        for column, cell in zip(self.columns, cells, strict=False):
            if ROW_CELL.match(cell) is None:
                return None
            values[column] = _value(cell)
        return self._payload(values)

    def _delimited(self, text: str) -> Payload | None:
        cells = _delimited_cells(text, self.delimiter)
        if cells is None or len(cells) != len(self.columns):
            return None
        values: dict[str, float] = {}
        for column, cell in zip(self.columns, cells, strict=True):
            if ROW_CELL.match(cell) is not None:  # (a word — ``No log``, ``True``, a run's name — is no number)
                values[column] = _value(cell)
        return self._payload(values)

    def _aligned(self, text: str) -> Payload | None:
        if len(self.starts) != len(self.columns) or "\t" in text:
            return None
        values: dict[str, float] = {}
        for cell in ROW_WORD.finditer(text):
            at = bisect_right(self.starts, cell.start() + 1) - 1  # (a number right-aligned one short of its column)
            if at < 0 or ROW_CELL.match(cell[0]) is None or self.columns[at] in values:
                return None
            values[self.columns[at]] = _value(cell[0])
        return self._payload(values) if values else None

    def _payload(self, values: dict[str, float]) -> Payload | None:
        step = _step(self.columns, values)
        loss = _loss(values)
        if step is None or loss is None:
            return None
        return {"global_step": step} if self.progress_only else {"global_step": step, "loss": loss}


def table_header(text: str, above: Table | None = None) -> Table | None:
    """The table ``text`` heads, or None when it heads none; a header without a step or loss column gives an
    empty table (the one before it ends). ``above``: the table the line before headed, whose ruled header this
    line may complete, cell under cell (MATLAB's ``trainNetwork``: ``|  Mini-batch  |`` over ``|     Loss     |``)."""
    if text[:4] == "loss" and " ".join(text.split()) == VW_HEADER:
        return Table(VW_COLUMNS, progress_only=True)
    delimiter = "|" if sum(text.count(rule) for rule in RULES) >= 2 else "," if CSV_HEADER.match(text) else ""
    cells = _delimited_cells(text, delimiter) if delimiter else [cell for cell in CELL_GAP.split(text.strip()) if cell]
    if cells is not None and above is not None and _continues(above, cells):
        cells = [f"{name} {cell}".strip() for name, cell in zip(above.names, cells, strict=True)]
    elif cells is None or len(cells) < 3 or not all(HEADER_CELL.match(cell) for cell in cells):
        return None
    columns = tuple(field_key(cell) for cell in cells)
    if delimiter:
        starts: tuple[int, ...] = ()
    else:
        starts = tuple(cell.start() for cell in HEADER_WORD.finditer(text)) if "\t" not in text else ()
    names = tuple(cells) if delimiter == "|" else ()
    if not any(c in STEP_COLUMNS or c in EPOCH_COLUMNS for c in columns):
        return Table((), names=names)
    if (
        not any(_training_loss_column(c) or c in TOTAL_COLUMNS for c in columns)
        and len(YOLO_TERMS.intersection(columns)) < 2
    ):
        return Table((), names=names)
    return Table(columns, starts if len(starts) == len(columns) else (), delimiter)


def _continues(above: Table, cells: list[str]) -> bool:
    """Whether a ruled line's ``cells`` complete the header above it: as many, each blank or a name, some not
    blank."""
    return (
        len(cells) == len(above.names)
        and any(cells)
        and all(not cell or HEADER_CELL.match(cell) or cell[:1] == "(" for cell in cells)
    )


def _delimited_cells(text: str, delimiter: str) -> list[str] | None:
    """A ruled or CSV line's cells, stripped; a ruled line's outer rules hold no cell. None for a rule line alone."""
    if delimiter == ",":
        return [cell.strip() for cell in text.split(",")]
    cells = [cell.strip() for cell in RULE.split(text.strip())]
    if cells and not cells[0]:
        cells = cells[1:]
    if cells and not cells[-1]:
        cells = cells[:-1]
    return cells or None


def _value(cell: str) -> float:
    if cell.lstrip("+-") in ("nan", "inf"):
        return float(cell)
    number = NUMBER.search(cell)
    return float(number[0]) if number else math.nan


def _step(columns: tuple[str, ...], values: dict[str, float]) -> int | None:
    """The row's step: a step column, else its epoch (``1/20``: epoch 1)."""
    for names in (STEP_COLUMNS, EPOCH_COLUMNS):
        for column in columns:
            value = values.get(column, math.nan)  # (a blank cell: none)
            if column in names and math.isfinite(value) and value == int(value):
                return int(value)  # ``1/20``: its number before the total
    return None


def _training_loss_column(column: str) -> bool:
    return loss_like(column) and EVALUATION.search(column) is None


def _loss(values: dict[str, float]) -> float | None:
    """The row's training loss: a primary loss column, else a total column, else the sum of its training
    loss terms (Ultralytics' ``box_loss + cls_loss + dfl_loss`` is the loss it back-propagates)."""
    for name in PRIMARY_LOSSES:
        if name in values:
            return values[name]
    for name in TOTAL_COLUMNS:
        if name in values:
            return values[name]
    terms = [v for column, v in values.items() if _training_loss_column(column)]
    if not terms and len(yolo := [v for column, v in values.items() if column in YOLO_TERMS]) >= 2:
        terms = yolo
    return sum(terms) if terms else None
