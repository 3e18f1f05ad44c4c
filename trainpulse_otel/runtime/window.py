"""The stream window: the last ``history_size`` frames, newest last.

Every frame the pipeline diagnoses passes through here. Detectors keep their
own incremental statistics (each over the horizon its physics needs), so the
window is not what they read; it is the recent history users see: the
daemon's ``GET /v1/history`` and ``trainpulse top``'s sparklines, full from
the first frame. ``history_size`` bounds it. The newest frame is kept whole (the
snapshot is read from it); each older one as its history record
(:func:`~trainpulse_otel.samples.history_record`: this node's GPUs, host and
job-level report), so a job daemon's window does not hold 300 copies of every
node's GPUs and every rank.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ..samples import Frame, history_record

DEFAULT_HISTORY_SIZE = 300


class Window:
    """The last ``size`` frames. Appending past the bound forgets the oldest frame."""

    def __init__(self, size: int = DEFAULT_HISTORY_SIZE) -> None:
        if size < 1:
            raise ValueError("window size must be at least 1")
        self._frames: deque[Frame] = deque(maxlen=size)

    @property
    def size(self) -> int:
        """The bound: how many frames the window keeps."""
        return self._frames.maxlen or 0

    def append(self, frame: Frame) -> None:
        """Add the newest frame; the one before it keeps its history record."""
        frames = self._frames
        if frames:
            frames[-1] = history_record(frames[-1])
        frames.append(frame)

    @property
    def latest(self) -> Frame | None:
        """The newest frame, or None before the first tick."""
        return self._frames[-1] if self._frames else None

    def frames(self, since: float | None = None, limit: int | None = None) -> tuple[Frame, ...]:
        """A stable copy of the frames, oldest first: those after ``since``, at most the newest ``limit``."""
        frames = tuple(self._frames)
        if since is not None:
            frames = tuple(f for f in frames if f.ts > since)
        if limit is not None:
            frames = frames[-limit:] if limit > 0 else ()
        return frames

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[Frame]:
        return iter(self.frames())
