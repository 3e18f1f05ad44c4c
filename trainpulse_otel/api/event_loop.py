"""waitress's serving loop on ``epoll``, its cost in the active connections rather than in all of them.

waitress's ``poll()`` loop builds a new poll set every turn, asking each connection whether it is
readable and writable: with a thousand ranks' keep-alive connections open that is ~1.5 ms of Python
a turn, and the loop turns for nearly every request. :func:`loop` keeps each connection
registered between turns and asks only the connections that something happened to: those with an
event, those with a request in service or a response unsent, new ones, and the listening socket and
the trigger every turn. All connections are asked once a second (``SWEEP_S``), which finds what the
idle-connection cleanup marked for closing. :class:`TrackedMap` (the server's socket map) records
which descriptors come and go. The semantics are waitress's own (level-triggered, the same flags and
handlers); off Linux, :data:`AVAILABLE` is False and the server keeps waitress's ``poll()``.
"""

from __future__ import annotations

import contextlib
import select
import time
from typing import Any

from waitress import wasyncore
from waitress.channel import HTTPChannel

AVAILABLE = hasattr(select, "epoll")
#: How often every connection is asked again, in seconds.
SWEEP_S = 1.0
_READ = select.POLLIN | select.POLLPRI


class TrackedMap(dict):  # type: ignore[type-arg]
    """A socket map that records each descriptor added or removed, in order, for :func:`loop`."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[int] = []

    def __setitem__(self, fd: int, obj: Any) -> None:
        super().__setitem__(fd, obj)
        self.changes.append(fd)

    def __delitem__(self, fd: int) -> None:
        super().__delitem__(fd)
        self.changes.append(fd)

    def clear(self) -> None:
        self.changes.extend(self)
        super().clear()


class _Registry:
    """The descriptors registered with one epoll object and the flags each is registered with."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.flags: dict[int, int] = {}

    def set(self, fd: int, flags: int) -> None:
        old = self.flags.get(fd, 0)
        if flags == old:
            return
        try:
            if not flags:
                self.epoll.unregister(fd)
            elif old:
                self.epoll.modify(fd, flags)
            else:
                self.epoll.register(fd, flags)
        except OSError:  # closed already (epoll forgot it), or a new socket on a reused number
            self.forget(fd)
            if flags:
                self.epoll.register(fd, flags)
        self.flags[fd] = flags

    def forget(self, fd: int) -> None:
        if self.flags.pop(fd, 0):
            with contextlib.suppress(OSError):
                self.epoll.unregister(fd)


def _flags(obj: Any) -> int:
    flags = _READ if obj.readable() else 0
    if obj.writable() and not obj.accepting:
        flags |= select.POLLOUT
    return flags


def loop(timeout: float = 1.0, use_poll: bool = True, map: Any = None, count: Any = None) -> None:  # noqa: A002
    """Serve ``map`` until it is empty (waitress calls it as ``wasyncore.loop``; ``use_poll``, ``count`` unused)."""
    sockets: TrackedMap = map
    registry, watch = _Registry(), set(sockets)
    sockets.changes.clear()
    next_sweep = time.monotonic() + SWEEP_S
    try:
        while sockets:
            for fd in sockets.changes:
                registry.forget(fd)
                watch.add(fd)
            sockets.changes.clear()
            if time.monotonic() >= next_sweep:
                watch.update(sockets)
                next_sweep = time.monotonic() + SWEEP_S
            _recheck(registry, watch, sockets)
            for fd, flags in registry.epoll.poll(timeout):
                obj = sockets.get(fd)
                if obj is not None:
                    wasyncore.readwrite(obj, flags)
                    watch.add(fd)
    finally:
        registry.epoll.close()


def _recheck(registry: _Registry, watch: set[int], sockets: TrackedMap) -> None:
    """Register each watched descriptor's flags now; a connection only waiting for its next request leaves."""
    for fd in list(watch):
        obj = sockets.get(fd)
        if obj is None:
            registry.forget(fd)
            watch.discard(fd)
            continue
        flags = _flags(obj)
        registry.set(fd, flags)
        if flags == _READ and isinstance(obj, HTTPChannel):
            watch.discard(fd)
