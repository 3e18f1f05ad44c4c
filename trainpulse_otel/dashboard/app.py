"""``trainpulse top``: the live loop around the panels, and the one-frame path for scripts.

The loop polls its source every interval, redraws at the terminal's current
size (so a resize shows at the next frame, and SIGWINCH brings that frame
forward), and reacts to keys at once. ``q``, Ctrl-C, SIGTERM and SIGHUP end it
cleanly: the alternate screen, the cursor and the terminal modes are restored
by the ``with`` blocks on every way out.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live

from ..publish.snapshot import Snapshot
from .keys import KeyReader
from .layout import render_screen
from .sources import Source
from .view import History, View

QUIT_KEYS = frozenset("qQ\x03")
PAUSE_KEYS = frozenset("pP ")
REFRESH_KEYS = frozenset("rR")


def run_top(source: Source, interval_s: float, once: bool = False, console: Console | None = None) -> int:
    """Run the dashboard over ``source``; one frame to stdout with ``once`` or when stdout is not a terminal."""
    console = console or Console()
    interactive = not once and console.is_terminal
    history = History()
    try:
        source.start(history, live=interactive)
        if interactive:
            Dashboard(source, history, console, interval_s).run()
            return 0
        return print_frame(source, history, console)
    finally:
        source.close()


def print_frame(source: Source, history: History, console: Console) -> int:
    """One frame, as tall as it needs, for scripts and pipes; 1 when a daemon could not be read."""
    snapshot = source.poll()
    if snapshot is not None:
        history.add(snapshot)
    elif source.link.remote:
        print(f"trainpulse: cannot read {source.link.source}/v1/snapshot: {source.link.error}", file=sys.stderr)
        return 1
    view = View(snapshot, history, source.link, time.time(), interactive=False)
    console.print(render_screen(view, console, console.width, None))
    return 0


class Dashboard:
    """The interactive loop: poll, draw, wait for the interval or a key, repeat."""

    def __init__(
        self,
        source: Source,
        history: History,
        console: Console,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.history = history
        self.console = console
        self.interval_s = interval_s
        self.clock = clock
        self.snapshot: Snapshot | None = None
        self.paused = False
        self.stop = threading.Event()
        self._wake = threading.Event()
        self._poll_now = True

    def on_key(self, key: str) -> None:
        """``q``/Ctrl-C quit, ``p``/space pause, ``r`` poll now."""
        if key in QUIT_KEYS:
            self.stop.set()
        elif key in PAUSE_KEYS:
            self.paused = not self.paused
        elif key in REFRESH_KEYS:
            self._poll_now = True
        self._wake.set()

    def poll(self) -> None:
        snapshot = self.source.poll()
        if snapshot is not None:
            self.snapshot = snapshot
            self.history.add(snapshot)

    def frame(self) -> RenderableType:
        """The frame at the console's size now (a daemon's body that does not read never gets here)."""
        width, height = self.console.size
        view = View(self.snapshot, self.history, self.source.link, self.clock(), self.paused)
        return render_screen(view, self.console, width, height)

    def run(self) -> None:
        """Until ``q``, Ctrl-C, SIGTERM or SIGHUP; the terminal is restored however it ends."""
        with (
            _signals(self._quit, self._wake.set),
            KeyReader(self.on_key),
            Live(
                console=self.console, screen=True, auto_refresh=False, redirect_stdout=False, redirect_stderr=False
            ) as live,
        ):
            next_poll = 0.0
            while not self.stop.is_set():
                now = time.monotonic()
                if self._poll_now or (not self.paused and now >= next_poll):
                    self._poll_now = False
                    self.poll()
                    next_poll = now + self.interval_s
                live.update(self.frame(), refresh=True)
                wait = self.interval_s if self.paused else max(0.0, next_poll - time.monotonic())
                self._wake.wait(wait)
                self._wake.clear()

    def _quit(self) -> None:
        self.stop.set()
        self._wake.set()


@contextmanager
def _signals(on_quit: Callable[[], None], on_resize: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT/SIGTERM/SIGHUP to ``on_quit`` and SIGWINCH to ``on_resize`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted: dict[int, Callable[[], None]] = {signal.SIGINT: on_quit, signal.SIGTERM: on_quit}
    for name, action in (("SIGHUP", on_quit), ("SIGWINCH", on_resize)):
        if hasattr(signal, name):
            wanted[getattr(signal, name)] = action
    previous: dict[int, Any] = {}
    try:
        for signo, action in wanted.items():
            previous[signo] = signal.signal(signo, lambda _signo, _frame, act=action: act())
        yield
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)
