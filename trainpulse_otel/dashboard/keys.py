"""Single keypresses from the terminal, read on a background thread.

The terminal goes into cbreak mode — no line buffering, no echo — rather than
full raw mode: raw mode also turns off output post-processing, and rich's
frames (plain ``\\n`` line ends) would then stair-step across the screen; and
cbreak keeps ``ISIG``, so Ctrl-C still arrives as SIGINT, which the dashboard
handles like ``q``. The saved settings are put back on every way out of the
``with`` block (normal exit, exception, or a signal handler that ends the loop).
"""

from __future__ import annotations

import os
import select
import sys
import termios
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

POLL_S = 0.1


class KeyReader:
    """``with KeyReader(on_key):`` calls ``on_key(char)`` for each key typed; a no-op off a terminal."""

    def __init__(self, on_key: Callable[[str], None], stream: TextIO | None = None) -> None:
        self.on_key = on_key
        self.stream = stream or sys.stdin
        self._saved: list | None = None
        self._fd = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="trainpulse-top-keys", daemon=True)

    def __enter__(self) -> KeyReader:
        try:
            self._fd = self.stream.fileno()
        except (AttributeError, ValueError, OSError):
            return self
        if not os.isatty(self._fd):
            return self
        self._saved = termios.tcgetattr(self._fd)
        cbreak = termios.tcgetattr(self._fd)
        cbreak[3] &= ~(termios.ICANON | termios.ECHO)
        cbreak[6][termios.VMIN], cbreak[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self._fd, termios.TCSANOW, cbreak)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._fd], [], [], POLL_S)
                if not ready:
                    continue
                data = os.read(self._fd, 64)
            except OSError:  # the terminal went away: nothing more to read
                return
            if not data:  # end of input (hang-up)
                return
            for char in data.decode("utf-8", errors="replace"):
                self.on_key(char)
