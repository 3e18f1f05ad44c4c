"""The stream window: a bounded ring of frames, newest last."""

from __future__ import annotations

from collections import deque
from typing import Iterator

from ..samples import Frame

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
        """Add the newest frame."""
        self._frames.append(frame)

    @property
    def latest(self) -> Frame | None:
        """The newest frame, or None before the first tick."""
        return self._frames[-1] if self._frames else None

    def frames(self) -> tuple[Frame, ...]:
        """A stable copy of the frames, oldest first."""
        return tuple(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[Frame]:
        return iter(self.frames())
