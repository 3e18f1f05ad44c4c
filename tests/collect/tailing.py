"""A controllable clock and a file writer for the tailer and follower tests."""

from __future__ import annotations

from pathlib import Path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)
