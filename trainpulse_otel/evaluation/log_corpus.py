"""``trainpulse eval -logs DIR``: the log reader and the diagnosis scored on a labelled corpus of real logs.

``DIR/index.json`` lists the excerpts (``{"version": 1, "files": [{"file", "class", "split", "subject"?, …}]}``),
or names the parts that do (``"parts": ["index-train.json", …]``, each such an object, beside it — a corpus past one
file's size):
each a log with its class — a signal name, or ``healthy`` — and, where its lines show it, the rank, GPU, XID or
host at fault. Each file is replayed as ``trainpulse replay FILE`` replays it (:func:`~..runtime.replay_logs`), and
judged on:

- **the class it is given**: at each tick, the first signal of the corpus's classes among the top-ranked root
  cause's signals (else among the active signals); the file's class is the last tick's that had one, ``healthy``
  when none ever did — what a user reads at the end of the incident;
- **a right signal**: its class's signal was raised at some point (``healthy``: nothing of the classes was);
- **the subject named**: every labelled value is named by a signal of its class (subject or evidence) or by
  a root cause that signal drives;
- on healthy logs, **false alarms** (any signal raised, of any kind; critical ones apart) and **reports read**.

Per split: each class's precision, recall and F1, the macro-F1 over the classes labelled or given, and the
shares above, checked against :data:`FIGURES` (the issue's bar). The corpus and its gathering:
tests/fixtures/logs/corpus/README.md; the published tables: docs/evaluation.md.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..diagnose import Diagnosis, PipelineResult
from ..runtime import Plugins, discover, replay_logs

HEALTHY = "healthy"
INDEX = "index.json"
SUBJECT_KEYS = ("rank", "gpu_index", "xid", "hostname")
#: The name each excerpt is replayed under (see :func:`run_case`).
NEUTRAL_NAME = "excerpt.log"

#: The bar each split is held to: macro-F1, failures with their right signal, subjects named (shares, 0-1).
FIGURES = {"macro_f1": 0.95, "right_signal": 0.95, "subject_named": 0.90}


class CorpusError(ValueError):
    """An index that cannot be scored: missing, malformed, or naming a file or class that is not there."""


@dataclass(frozen=True)
class CorpusEntry:
    """One labelled excerpt of the index."""

    file: str
    label: str
    split: str
    framework: str = ""
    source: str = ""
    subject: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class CaseResult:
    """What the diagnosis made of one excerpt."""

    entry: CorpusEntry
    given: str  # the class the diagnosis gives it (HEALTHY: none)
    raised: dict[str, str]  # every signal raised, with its worst severity
    subject_named: bool | None  # None: no subject labelled
    lines: int
    reports: int
    unknown: int

    @property
    def right_signal(self) -> bool:
        label = self.entry.label
        return label in self.raised if label != HEALTHY else self.given == HEALTHY

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.entry.file,
            "class": self.entry.label,
            "given": self.given,
            "raised": self.raised,
            "right_signal": self.right_signal,
            "subject_named": self.subject_named,
            "lines": self.lines,
            "reports": self.reports,
            "not_understood": self.unknown,
        }


@dataclass
class ClassFigures:
    support: int
    precision: float
    recall: float
    f1: float


@dataclass
class SplitReport:
    """One split's figures and cases."""

    split: str
    cases: list[CaseResult]
    classes: dict[str, ClassFigures]
    macro_f1: float
    right_signal: tuple[int, int]  # failures with their signal raised, failures
    subject_named: tuple[int, int]  # subjects named, subjects labelled
    healthy_parsed: tuple[int, int]  # healthy logs with a report read, healthy logs
    healthy_warned: Counter[str]  # signals raised on healthy logs, by name (each log once)
    healthy_critical: list[str]  # healthy files with a critical signal

    @property
    def failures(self) -> list[str]:
        """The figures this split misses, in words (empty: it meets every one)."""
        out = [f"macro-F1 {self.macro_f1:.3f} < {FIGURES['macro_f1']}"] if self.macro_f1 < FIGURES["macro_f1"] else []
        for name, (got, of) in (("right_signal", self.right_signal), ("subject_named", self.subject_named)):
            if of and got / of < FIGURES[name]:
                out.append(f"{name.replace('_', ' ')} {got}/{of} < {FIGURES[name]:.0%}")
        if self.healthy_critical:
            out.append(f"critical signal on {len(self.healthy_critical)} healthy log(s)")
        if self.healthy_parsed[0] < self.healthy_parsed[1]:
            out.append(f"{self.healthy_parsed[1] - self.healthy_parsed[0]} healthy log(s) with no report read")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "logs": len(self.cases),
            "macro_f1": round(self.macro_f1, 4),
            "classes": {
                name: {
                    "support": c.support,
                    "precision": round(c.precision, 4),
                    "recall": round(c.recall, 4),
                    "f1": round(c.f1, 4),
                }
                for name, c in self.classes.items()
            },
            "right_signal": list(self.right_signal),
            "subject_named": list(self.subject_named),
            "healthy_parsed": list(self.healthy_parsed),
            "healthy_warned": dict(self.healthy_warned),
            "healthy_critical": self.healthy_critical,
            "passed": not self.failures,
            "missed": self.failures,
            "cases": [c.to_dict() for c in self.cases],
        }


def load_index(root: Path) -> list[CorpusEntry]:
    """The index's entries, its parts' in their order; :class:`CorpusError` naming what is wrong with it."""
    return [_entry(root, where, item) for where, item in _items(root, INDEX)]


def index_items(root: Path) -> list[Any]:
    """The index's entries as written (a citation's ``source`` and ``note`` with them), its parts' in their order."""
    return [item for _, item in _items(root, INDEX)]


def _items(root: Path, name: str, part: bool = False) -> list[tuple[str, Any]]:
    """``(where, entry)`` of the index file ``name`` and, for the index itself, of the parts it names."""
    path = root / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CorpusError(f"{path}: not JSON: {exc}") from None
    files = data.get("files", []) if isinstance(data, dict) else None
    parts = data.get("parts", []) if isinstance(data, dict) and not part else []
    if not isinstance(files, list) or not isinstance(parts, list) or not (files or parts or "files" in data):
        raise CorpusError(f"{path}: expected an object with a list 'files'" + ("" if part else " or 'parts'"))
    out = [(f"{name} files[{i}]", item) for i, item in enumerate(files)]
    for each in parts:
        if not isinstance(each, str) or Path(each).is_absolute() or ".." in Path(each).parts:
            raise CorpusError(f"{path}: a part is a file name beside it, not {each!r}")
        out += _items(root, each, part=True)
    return out


def _entry(root: Path, where: str, item: Any) -> CorpusEntry:
    if not isinstance(item, dict):
        raise CorpusError(f"{where}: expected an object")
    for key in ("file", "class"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise CorpusError(f"{where}: '{key}' must be a non-empty string")
    if not (root / item["file"]).is_file():
        raise CorpusError(f"{where}: no file {item['file']}")
    subject = item.get("subject") or {}
    if not isinstance(subject, dict) or set(subject) - set(SUBJECT_KEYS):
        raise CorpusError(f"{where}: 'subject' may only hold {', '.join(SUBJECT_KEYS)}")
    return CorpusEntry(
        item["file"],
        item["class"],
        str(item.get("split") or "all"),
        str(item.get("framework") or ""),
        str(item.get("source") or ""),
        subject,
    )


def check_classes(entries: Iterable[CorpusEntry], signals: Iterable[str]) -> None:
    """:class:`CorpusError` for a class that is neither a signal nor ``healthy``."""
    known = set(signals) | {HEALTHY}
    for entry in entries:
        if entry.label not in known:
            raise CorpusError(f"{entry.file}: class {entry.label!r} is no signal (nor {HEALTHY!r})")


class _Watch:
    """Follows one replay tick by tick: the signals raised, the class given, the values named."""

    def __init__(self, classes: frozenset[str], label: str) -> None:
        self.classes, self.label = classes, label
        self.raised: dict[str, str] = {}
        self.given = HEALTHY
        self.named: dict[str, set[Any]] = {key: set() for key in SUBJECT_KEYS}
        self.first: dict[str, float] = {}  # when each signal was first raised

    def __call__(self, step: PipelineResult) -> None:
        d = step.diagnosis
        for s in d.signals:
            if self.raised.get(s.name) != "critical":
                self.raised[s.name] = s.severity
            if s.name == self.label:
                _collect(self.named, s.subject)
                _collect(self.named, s.evidence)
        for s in d.signals:
            self.first.setdefault(s.name, s.since)
        top = _top_class(d, self.classes, self.first)
        if top is not None:
            self.given = top
        for cause in d.root_causes:
            if self.label in cause.signals:
                _collect(self.named, cause.subject)

    def subject_named(self, subject: Mapping[str, Any]) -> bool | None:
        if not subject:
            return None
        for key, want in subject.items():
            wanted = want if isinstance(want, list) else [want]
            if not all(w in self.named[key] or str(w) in self.named[key] for w in wanted):
                return False
        return True


def _top_class(d: Diagnosis, classes: frozenset[str], first: Mapping[str, float]) -> str | None:
    """The class the diagnosis gives now: of the top-ranked root cause that drives a class's signal, that
    signal (the first raised, where the cause drives several: a spike that became a NaN is the spike's); else the
    first active class signal; None when no class signal is active."""
    active = {s.name for s in d.signals}
    for cause in d.root_causes:
        driven = [name for name in cause.signals if name in classes and name in active]
        if driven:
            return min(driven, key=lambda name: first.get(name, d.ts))
    return next((s.name for s in d.signals if s.name in classes), None)


def _collect(named: dict[str, set[Any]], where: Mapping[str, Any]) -> None:
    """The ranks, GPUs, XIDs and hosts a subject or evidence names, singly or in lists (``ranks``, ``gpu_indices``,
    ``xids``, ``hostnames``; a line's ``host``), also inside nested entries (a stall's ``lagging``)."""
    plural = {
        "rank": ("ranks", "missing_ranks", "behind_ranks", "local_rank", "peer_rank", "peer_ranks"),
        "gpu_index": ("gpu_indices",),
        "xid": ("xids", "xid_errors"),
        "hostname": ("hostnames", "host"),  # a failure line's own host is evidence (torchrun's table, Slurm's)
    }
    for key in SUBJECT_KEYS:
        for name in (key, *plural[key]):
            value = where.get(name)
            if isinstance(value, (list, tuple, set)):
                named[key].update(v for v in value if isinstance(v, (int, str)))
            elif isinstance(value, (int, str)):
                named[key].add(value)
    for value in where.values():
        if isinstance(value, list) and value and isinstance(value[0], Mapping):
            for item in value:
                _collect(named, item)


def run_case(
    root: Path, entry: CorpusEntry, classes: frozenset[str], settings: Settings, plugins: Plugins
) -> CaseResult:
    """One excerpt replayed and judged, under a neutral name: the corpus's file names describe the excerpt
    (``…-rank1-…``), and a log's name is read for its rank."""
    watch = _Watch(classes, entry.label)
    with tempfile.TemporaryDirectory(prefix="trainpulse-eval-") as scratch:
        path = Path(scratch) / NEUTRAL_NAME
        shutil.copyfile(root / entry.file, path)
        done = replay_logs([str(path)], settings, plugins=plugins, on_result=watch)
    stats = done.reader.stats
    return CaseResult(
        entry, watch.given, watch.raised, watch.subject_named(entry.subject), stats.lines, stats.reports, stats.unknown
    )


def score(split: str, cases: list[CaseResult], classes: Iterable[str]) -> SplitReport:
    """A split's figures from its cases (``classes``: every class of the corpus, whatever the split holds)."""
    labels = [c.entry.label for c in cases]
    given = [c.given for c in cases]
    names = sorted(set(labels) | (set(given) & set(classes)))
    figures = {name: _class_figures(name, labels, given) for name in names}
    failures = [c for c in cases if c.entry.label != HEALTHY]
    healthy = [c for c in cases if c.entry.label == HEALTHY]
    with_subject = [c for c in failures if c.subject_named is not None]
    warned: Counter[str] = Counter(name for c in healthy for name in c.raised)
    return SplitReport(
        split,
        cases,
        figures,
        sum(f.f1 for f in figures.values()) / len(figures) if figures else 0.0,
        (sum(c.right_signal for c in failures), len(failures)),
        (sum(bool(c.subject_named) for c in with_subject), len(with_subject)),
        (sum(c.reports > 0 for c in healthy), len(healthy)),
        warned,
        [c.entry.file for c in healthy if "critical" in c.raised.values()],
    )


def _class_figures(name: str, labels: Sequence[str], given: Sequence[str]) -> ClassFigures:
    tp = sum(a == name and b == name for a, b in zip(labels, given, strict=True))
    support, predicted = labels.count(name), given.count(name)
    precision = tp / predicted if predicted else (1.0 if not support else 0.0)
    recall = tp / support if support else (1.0 if not predicted else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return ClassFigures(support, precision, recall, f1)


def evaluate_logs(
    root: Path, splits: Sequence[str] | None = None, settings: Settings | None = None
) -> list[SplitReport]:
    """Every excerpt of the corpus at ``root`` (of ``splits``; None: all), scored split by split."""
    entries = load_index(root)
    plugins = discover()
    check_classes(entries, plugins.vocabulary.signal_names)
    if splits:
        unknown = set(splits) - {e.split for e in entries}
        if unknown:
            raise CorpusError(f"no split {', '.join(sorted(unknown))} in {root / INDEX}")
        entries = [e for e in entries if e.split in splits]
    classes = frozenset(e.label for e in load_index(root)) - {HEALTHY}
    settings = settings or Settings()
    by_split: dict[str, list[CaseResult]] = {}
    for entry in entries:
        by_split.setdefault(entry.split, []).append(run_case(root, entry, classes, settings, plugins))
    return [score(name, cases, classes) for name, cases in sorted(by_split.items())]


def format_logs_report(root: Path, reports: Sequence[SplitReport], misses: bool = True) -> str:
    """The text ``trainpulse eval -logs`` prints: per split, the class table, the figures and the misses."""
    out: list[str] = []
    for r in reports:
        healthy = r.healthy_parsed[1]
        out.append(
            f"{root} — split {r.split}: {len(r.cases)} logs ({len(r.cases) - healthy} failures, {healthy} healthy)"
        )
        out.append(f"  {'class':<22}{'logs':>6}{'precision':>11}{'recall':>8}{'F1':>7}")
        for name, c in r.classes.items():
            out.append(f"  {name:<22}{c.support:>6}{c.precision:>11.2f}{c.recall:>8.2f}{c.f1:>7.2f}")
        out.append(
            f"  macro-F1 {r.macro_f1:.3f} · right signal {_share(r.right_signal)} · subject named "
            f"{_share(r.subject_named)}"
        )
        warned = ", ".join(f"{n} ×{k}" for n, k in r.healthy_warned.most_common()) or "none"
        out.append(
            f"  healthy: {_share(r.healthy_parsed)} with reports read · critical on {len(r.healthy_critical)}"
            f" · signals raised: {warned}"
        )
        wrong = [
            c
            for c in r.cases
            if c.given != c.entry.label
            or not c.right_signal
            or c.subject_named is False
            or (c.entry.label == HEALTHY and (c.reports == 0 or "critical" in c.raised.values()))
        ]
        if misses and wrong:
            out.append("  misses:")
            for c in wrong:
                raised = ", ".join(f"{k}({v[0]})" for k, v in sorted(c.raised.items())) or "nothing"
                subject = " · subject not named" if c.subject_named is False else ""
                out.append(
                    f"    {c.entry.file}: {c.entry.label} → {c.given}; raised {raised}; "
                    f"{c.reports} report(s) of {c.lines} line(s){subject}"
                )
        out.append("  " + ("PASS" if not r.failures else "MISSED: " + "; ".join(r.failures)))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _share(pair: tuple[int, int]) -> str:
    got, of = pair
    return f"{got}/{of} ({got / of:.0%})" if of else "0/0"
