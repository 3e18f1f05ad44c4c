"""The log reader's diagnosis of a corpus's excerpts, bare and in the shapes consoles give them.

A user's log reaches TrainPulse in the shape its launcher, collector or terminal gave it: every line behind srun's
task label, a Ray actor's or kubectl's prefix, a collector's stamp, a journald prefix, coloured, cut where a terminal
wrapped it. A
shape is a function of an excerpt's lines (:data:`SHAPES`); :func:`shape_changes` replays each excerpt bare and in
each shape (as ``trainpulse eval -logs`` replays it) and lists the excerpts whose given class the shape changed.
A label says where a line came from, never what happened: a change there is the reader's fault. A shape that
brings a clock (a stamp, journald's) also brings its times, which may not be the log's own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..runtime import Plugins
from .log_corpus import CorpusEntry, run_case

Shape = Callable[[Sequence[str]], list[str]]


def _each(wrap: Callable[[int, str], str]) -> Shape:
    return lambda lines: [wrap(n, text) for n, text in enumerate(lines)]


def _wrapped(width: int) -> Shape:
    return lambda lines: [text[i : i + width] for text in lines for i in range(0, len(text) or 1, width)]


#: The shapes, by what gives them (:data:`LABELS` only label a line).
SHAPES: Mapping[str, Shape] = {
    "srun --label": _each(lambda n, text: f"0: {text}"),
    "Ray actor": _each(lambda n, text: f"(RayTrainWorker pid=4321, ip=10.0.0.5) {text}"),
    "pdsh": _each(lambda n, text: f"worker-5: {text}"),
    "Docker Compose": _each(lambda n, text: f"trainer-1  | {text}"),
    "kubectl logs --prefix": _each(lambda n, text: f"[pod/trainer-worker-0/pytorch] {text}"),
    "ANSI colour": _each(lambda n, text: f"\x1b[32m{text}\x1b[0m"),
    "CRLF": _each(lambda n, text: f"{text}\r"),
    "kubectl logs --timestamps": _each(lambda n, text: f"2024-05-01T10:00:00.{n:09d}Z {text}"),
    "journald": _each(lambda n, text: f"Dec  7 05:33:48 gpu-node-3 python[1234]: {text}"),
    "wrapped at 200 columns": _wrapped(200),
    "Markdown quote": _each(lambda n, text: f"> {text}"),
    "indented code block": _each(lambda n, text: f"    {text}"),
}
#: The shapes that only label a line (its words and times are the log's own).
LABELS = ("srun --label", "Ray actor", "pdsh", "Docker Compose", "kubectl logs --prefix", "ANSI colour", "CRLF")
LABELS += ("Markdown quote",)


@dataclass(frozen=True)
class Change:
    """An excerpt whose given class a shape changed."""

    file: str
    label: str
    bare: str
    shaped: str


def shape_changes(
    root: Path,
    entries: Iterable[CorpusEntry],
    classes: frozenset[str],
    settings: Settings,
    plugins: Plugins,
    shapes: Mapping[str, Shape] = SHAPES,
) -> dict[str, list[Change]]:
    """Per shape of ``shapes`` (by name), the excerpts of ``entries`` whose given class it changed (every shape
    listed, even one that changed none)."""
    changes: dict[str, list[Change]] = {name: [] for name in shapes}
    with tempfile.TemporaryDirectory(prefix="trainpulse-shapes-") as scratch:
        for entry in entries:
            bare = run_case(root, entry, classes, settings, plugins).given
            lines = (root / entry.file).read_text(encoding="utf-8", errors="replace").splitlines()
            shaped_entry = replace(entry, file=Path(entry.file).name)
            for name, shape in shapes.items():
                (Path(scratch) / shaped_entry.file).write_text("\n".join(shape(lines)) + "\n", encoding="utf-8")
                given = run_case(Path(scratch), shaped_entry, classes, settings, plugins).given
                if given != bare:
                    changes[name].append(Change(entry.file, entry.label, bare, given))
    return changes
