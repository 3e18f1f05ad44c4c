"""The labelled corpus's ``train`` excerpts, read by :class:`LogReader` as a replay reads a file (the ``test``
split is never read by the tests: it must stay unread)."""

from __future__ import annotations

from pathlib import Path

from trainpulse_otel.config import Settings
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import LogEvent, TrainingSample

TRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus" / "train"


def read_excerpt(name: str) -> list[TrainingSample | LogEvent]:
    """What the reader tells of the ``train`` excerpt ``name``, in order, under a neutral file name."""
    reader = LogReader()
    out: list[TrainingSample | LogEvent] = []
    for n, line in enumerate((TRAIN / name).read_text(encoding="utf-8").splitlines(), 1):
        out += reader.feed(LogLine(line, "excerpt.log", n))
    return out + reader.flush()


def line_of(name: str, words: str) -> str:
    """The first line of the ``train`` excerpt ``name`` that holds ``words``."""
    return next(text for text in (TRAIN / name).read_text(encoding="utf-8").splitlines() if words in text)


def told_alone(*lines: str) -> list[str]:
    """The event kinds a stream of only ``lines`` tells (a paste of a last line or two)."""
    reader = LogReader()
    out = [e for n, line in enumerate(lines, 1) for e in reader.feed(LogLine(line, "paste.log", n))]
    return [e.kind for e in out + reader.flush() if isinstance(e, LogEvent)]


def reports(name: str) -> list[TrainingSample]:
    """The training reports the reader tells of the ``train`` excerpt ``name``."""
    return [r for r in read_excerpt(name) if isinstance(r, TrainingSample)]


def replayed_signals(path: Path) -> dict[str, dict]:
    """Every signal a replay of the file at ``path`` raised, with its evidence and subject when first raised."""
    seen: dict[str, dict] = {}

    def watch(step) -> None:
        for s in step.diagnosis.signals:
            seen.setdefault(s.name, {**s.evidence, **s.subject})

    replay_logs([str(path)], Settings(), on_result=watch)
    return seen


def excerpt_signals(name: str, tmp_path: Path) -> dict[str, dict]:
    """:func:`replayed_signals` of the ``train`` excerpt ``name``, replayed under a neutral name."""
    path = tmp_path / "excerpt.log"
    path.write_bytes((TRAIN / name).read_bytes())
    return replayed_signals(path)
