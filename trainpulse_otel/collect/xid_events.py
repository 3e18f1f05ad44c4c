"""XID events from NVML: one event set for every GPU, drained without blocking each tick.

NVML queues a ``nvmlEventTypeXidCriticalError`` event per XID the driver
raises; ``eventData`` is the XID code (999 for one NVML cannot name). The
set is drained with a 0 ms wait, so a tick never blocks on it, and at most
``MAX_EVENTS_PER_TICK`` are taken per tick — an XID storm cannot stall the
collector; what is left is read on the next tick.

Registration fails on GPUs and drivers without event support (GeForce
boards, some VMs): :attr:`XidEvents.watching` then lists only those that
registered, and the collector falls back to the kernel log for the others.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ._nvml import NvmlSession

log = logging.getLogger(__name__)

#: nvml.h's bit for XID events, if the binding lacks the constant.
_XID_CRITICAL_ERROR = 0x8
MAX_EVENTS_PER_TICK = 256
_FAILED = object()


class XidEvents:
    """The XID event set of an NVML session and the GPUs registered on it."""

    def __init__(self, session: NvmlSession, handles: Iterable[tuple[int, Any]]) -> None:
        self._nvml = session
        self.watching: set[int] = set()
        self._set = session.query("nvmlEventSetCreate", default=None, field="XID event set")
        if self._set is None:
            return
        mask = session.constant("nvmlEventTypeXidCriticalError", _XID_CRITICAL_ERROR)
        for index, handle in handles:
            done = session.query(
                "nvmlDeviceRegisterEvents", handle, mask, self._set, default=_FAILED, field="XID events"
            )
            if done is not _FAILED:
                self.watching.add(index)
        log.info("NVML XID events on %d GPU(s)", len(self.watching))

    def drain(self) -> dict[int, list[int]]:
        """XID codes by GPU index that arrived since the last drain (never waits)."""
        out: dict[int, list[int]] = {}
        if self._set is None or not self.watching:
            return out
        for _ in range(MAX_EVENTS_PER_TICK):
            event = self._nvml.next_event(self._set)
            if event is None:
                break
            code = int(event.eventData)
            index = self._nvml.query("nvmlDeviceGetIndex", event.device, default=None, field="XID event's GPU")
            if index is None or code <= 0:
                continue
            out.setdefault(int(index), []).append(code)
        return out

    def close(self) -> None:
        """Free the event set (safe to call twice)."""
        event_set, self._set = self._set, None
        if event_set is not None:
            self._nvml.query("nvmlEventSetFree", event_set, default=None, field="XID event set")
