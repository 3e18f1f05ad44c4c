"""XID lines from the kernel log, for hosts where NVML's event set is not there.

The NVIDIA driver logs every XID as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=…,
GPU has fallen off the bus.``. :func:`~trainpulse_otel.logs.xid.parse_xid_line` (the
log reader's too) reads one such line; :class:`KernelXidLog` reads ``/dev/kmsg``
without ever blocking: the device is opened ``O_NONBLOCK``, positioned at the
end (XIDs from before the daemon started are history, not news), and each
tick reads the records that arrived since, at most ``MAX_RECORDS_PER_TICK``.
``/dev/kmsg`` is readable only by root or with ``CAP_SYSLOG`` under
``kernel.dmesg_restrict=1``: a log that cannot be opened is said once and
then the reader yields nothing — it never fails the tick.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable
from dataclasses import replace

from ..logs.xid import PciAddress, parse_xid_line
from ..samples import GpuSample

log = logging.getLogger(__name__)

DEFAULT_PATH = "/dev/kmsg"
MAX_RECORDS_PER_TICK = 512
_RECORD_BYTES = 8192  # a /dev/kmsg record is at most ~8 KiB; read() returns one record at a time

KernelLogFactory = Callable[[], "KernelXidLog"]
"""Opens the kernel log when a collector needs it (the composition root passes :class:`KernelXidLog`)."""


def xids_by_gpu(lines: list[str], gpu_of: dict[PciAddress, int]) -> dict[int, list[int]]:
    """XID codes by GPU index from kernel log lines; lines about PCI addresses not in ``gpu_of`` are skipped."""
    out: dict[int, list[int]] = {}
    for line in lines:
        parsed = parse_xid_line(line)
        if parsed is not None and parsed[0] in gpu_of:
            out.setdefault(gpu_of[parsed[0]], []).append(parsed[1])
    return out


class KernelXidLog:
    """New kernel log records since the last read, from ``/dev/kmsg``, without blocking."""

    def __init__(self, path: str = DEFAULT_PATH) -> None:
        self.path = path
        self._fd: int | None = None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            log.info("kernel log %s is not readable (%s); no XIDs from it", path, exc.strerror or exc)
            return
        with contextlib.suppress(OSError):  # a log that cannot seek is read from its start
            os.lseek(fd, 0, os.SEEK_END)
        self._fd = fd

    @property
    def readable(self) -> bool:
        return self._fd is not None

    def read_lines(self) -> list[str]:
        """The records that arrived since the last call (their message part), never waiting."""
        lines: list[str] = []
        while self._fd is not None and len(lines) < MAX_RECORDS_PER_TICK:
            try:
                record = os.read(self._fd, _RECORD_BYTES)
            except BlockingIOError:
                break  # nothing more for now
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # the ring buffer overwrote records we had not read: go on with the next
                log.warning("reading %s failed (%s); no more XIDs from it", self.path, exc)
                self.close()
                break
            if not record:
                break  # end of a plain file
            lines.extend(_messages(record.decode("utf-8", "replace")))
        return lines

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _messages(record: str) -> list[str]:
    """The message of each ``prefix;message`` record (a plain file may hold several lines)."""
    return [line.split(";", 1)[1] if ";" in line.split(" ", 1)[0] else line for line in record.splitlines()]


def with_xids(samples: tuple[GpuSample, ...], xids: dict[int, list[int]], heard: set[int]) -> tuple[GpuSample, ...]:
    """``samples`` with each heard GPU's ``xid_errors`` set (``()``: none came), in index order.

    A GPU with XIDs but no sample — it fell off the bus this tick — gets a
    sample of its own that carries only them, so its XID 79 is counted.
    """
    present = {s.index for s in samples}
    out = [replace(s, xid_errors=tuple(xids.get(s.index, ()))) if s.index in heard else s for s in samples]
    out += [GpuSample(index=i, xid_errors=tuple(codes)) for i, codes in xids.items() if i not in present and codes]
    return tuple(sorted(out, key=lambda s: s.index))
