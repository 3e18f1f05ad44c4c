"""Log files followed as ``tail -F`` follows them: globs, new files, rotation, lines still being written.

:class:`Tailer` follows every file its patterns (paths or globs, ``~`` and ``**`` allowed) match; each
:meth:`Tailer.poll` returns the lines completed since the last one, with their file and line number.

- Start: a file already there when following begins is read from its end (from the start of its last line if
  that line is still being written): history is not news, ``trainpulse replay`` reads it whole. A file that
  appears later, or replaces a rotated one, is read from its start.
- Patterns are matched again every :attr:`Limits.glob_every_s`; a pattern matching nothing is logged once,
  never an error. A file renamed to a name a pattern also matches (``train.log.1``) is not read twice.
- Rotation by rename: the old file, still open, is read to its end, then the new one from its start.
  Copy-and-truncate: a file shorter than what was read of it is read again from its start.
- A line ends at its newline; a last line without one waits :attr:`Limits.quiet_s` of quiet, then is taken
  as it is. A line longer than :attr:`Limits.max_line_bytes` is cut there.
- Bounds: bytes per file and per poll (the files take turns going first), files open at once.

Pure I/O, no parsing: :mod:`.follow` hands the lines to the log reader. docs/logs.md says it for users.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ._once import LogOnce

log = logging.getLogger(__name__)

Key = tuple[int, int]  # a file's identity: (device, inode)


@dataclass(frozen=True)
class Limits:
    """What bounds a tailer's memory and work."""

    max_line_bytes: int = 64 * 1024  # a longer line is cut (the longest real ones are a few KiB)
    max_file_bytes: int = 1 << 20  # read of one file in one poll: one chatty file cannot starve the others
    max_poll_bytes: int = 8 << 20  # read of all files in one poll
    max_files: int = 256  # files open at once (the most recently modified win)
    quiet_s: float = 1.0  # a line without its newline is taken after this long without new bytes
    glob_every_s: float = 2.0  # patterns matched again this often
    count_lines_up_to: int = 32 << 20  # a file found at start-up up to this size has its lines counted (numbers)
    remembered: int = 4096  # identities of closed files remembered, so a renamed one is not read again


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line of a followed file (without its newline): ``number`` is None where the lines before it were
    not counted (a large file found at start-up)."""

    path: str
    number: int | None
    text: str


@dataclass
class Polled:
    """What one poll read: the lines, and the files that went quiet after new lines (their readers may flush)."""

    lines: list[TailLine] = field(default_factory=list)
    quiet: list[str] = field(default_factory=list)
    bytes_read: int = 0


class _Handle:
    """One open file: its descriptor and identity, how far it is read, the line not yet ended."""

    __slots__ = ("fd", "key", "last_data", "number", "offset", "partial", "path", "skipping", "unsettled")

    def __init__(self, path: str, fd: int, key: Key, offset: int, number: int | None, now: float) -> None:
        self.path, self.fd, self.key, self.offset, self.number = path, fd, key, offset, number
        self.partial = bytearray()
        self.skipping = False  # inside a line past max_line_bytes (or begun before the offset): dropped to its end
        self.last_data = now
        self.unsettled = False  # lines came since it was last quiet


class Tailer:
    """Follows the files ``patterns`` match (see the module docstring); :meth:`poll` reads what is new."""

    def __init__(
        self, patterns: Sequence[str], limits: Limits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.patterns = tuple(os.path.expanduser(p) for p in patterns)
        self.limits = limits or Limits()
        self.clock = clock
        self._files: dict[str, _Handle | None] = {}  # followed paths; None: waiting for it (not there now)
        self._draining: list[_Handle] = []  # rotated away: read to their end, then closed
        self._closed: dict[Key, int] = {}  # identity -> offset read, of files closed (renamed ones not read again)
        self._literal = frozenset(p for p in self.patterns if not glob.has_magic(p))
        self._initial: set[str] | None = None  # the files there at the first look (read from their end)
        self._turn = 0
        self._next_glob = -float("inf")
        self._once = LogOnce(log)

    @property
    def paths(self) -> list[str]:
        """The files followed now."""
        return [path for path, handle in self._files.items() if handle is not None]

    def poll(self) -> Polled:
        """Read what was written since the last poll (see the module docstring)."""
        now = self.clock()
        if now >= self._next_glob:
            self._glob()
            self._next_glob = now + self.limits.glob_every_s
        out = Polled()
        budget = self.limits.max_poll_bytes
        for handle in list(self._draining):  # the old files first: their lines came before the new ones'
            budget -= self._drain(handle, min(budget, self.limits.max_file_bytes), now, out)
        paths = list(self._files)
        self._turn = (self._turn + 1) % max(1, len(paths))
        for path in paths[self._turn :] + paths[: self._turn]:
            if budget <= 0:
                self._once(("behind", path), logging.WARNING, "follow: falling behind on %s (bytes per poll)", path)
                break
            budget -= self._poll_file(path, min(budget, self.limits.max_file_bytes), now, out)
        return out

    def close(self) -> None:
        """Close every file."""
        for handle in list(self._open_handles()):
            self._close(handle)
        self._draining.clear()
        self._files.clear()

    # ------------------------------------------------------------------ paths

    def _glob(self) -> None:
        """Match the patterns again: new files are followed (the newest, up to max_files), vanished ones let go."""
        found: dict[str, float] = {}
        for pattern in self.patterns:
            matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
            files = {p: st.st_mtime for p in matches if (st := _stat(p)) is not None}
            if not files:
                self._once(("missing", pattern), logging.WARNING, "follow: %s matches no file yet; waiting", pattern)
            found.update(files)
        for path, handle in list(self._files.items()):
            if handle is None and path not in found and path not in self._literal:
                del self._files[path]
        if self._initial is None:  # the first look: these files were there before following began
            self._initial = set(found)
        waiting = [p for p in self._literal if p not in self._files]  # a literal path is waited for
        new = sorted((p for p in found if p not in self._files and p not in waiting), key=lambda p: -found[p])
        room = self.limits.max_files - len(self._files)
        if len(waiting) + len(new) > room:
            self._once("max_files", logging.WARNING, "follow: more than %d files; following the newest", room)
        for path in [*waiting, *new][: max(0, room)]:
            self._files[path] = None

    def _poll_file(self, path: str, budget: int, now: float, out: Polled) -> int:
        """Read one followed path; the bytes read."""
        handle, st, read = self._files[path], _stat(path), 0
        if handle is not None and (st is None or (st.st_dev, st.st_ino) != handle.key):
            log.info("follow: %s was %s", path, "removed or renamed" if st is None else "replaced (rotated)")
            self._files[path] = None
            self._draining.append(handle)  # read to its end before the new file
            read = self._drain(handle, budget, now, out)
            if handle in self._draining:
                return read
            handle = None
        if st is None:
            if path not in self._literal:
                del self._files[path]
            return read
        if handle is None:
            handle = self._files[path] = self._open(path, now)
            if handle is None:
                return read
        elif st.st_size < handle.offset:  # copied and truncated: its new lines are at its start
            log.info("follow: %s was truncated; reading it from its start", path)
            self._take_partial(handle, out)
            handle.offset, handle.number = 0, 0
        got = self._read(handle, budget - read, now, out)
        if not got:
            self._settle(handle, now, out)
        return read + got

    def _drain(self, handle: _Handle, budget: int, now: float, out: Polled) -> int:
        """Read a rotated file on; at its end, take its last line and close it."""
        read = self._read(handle, budget, now, out)
        if handle.offset >= _size(handle.fd):
            self._take_partial(handle, out)
            self._close(handle)
            self._draining.remove(handle)
        return read

    def _open(self, path: str, now: float) -> _Handle | None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            self._once(("open", path), logging.WARNING, "follow: cannot open %s (%s); retrying", path, exc.strerror)
            return None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if any(h.key == key for h in self._open_handles()):
            os.close(fd)  # the same file under another name (renamed by a rotation): followed there
            return None
        seen = self._closed.pop(key, None)
        skipping = False
        if seen is not None and st.st_size >= seen:
            offset, number = seen, None  # renamed after it was read: only what is new
        elif self._initial is not None and path in self._initial:
            offset, number, skipping = _start_of_last_line(fd, st.st_size, self.limits)
        else:
            offset, number = 0, 0
        if self._initial is not None:
            self._initial.discard(path)  # a file there later, at the same path, is new
        log.info("follow: reading %s from %s", path, "its start" if offset == 0 else f"byte {offset}")
        handle = _Handle(path, fd, key, offset, number, now)
        handle.skipping = skipping
        return handle

    def _open_handles(self) -> Iterable[_Handle]:
        yield from self._draining
        yield from (h for h in self._files.values() if h is not None)

    def _close(self, handle: _Handle) -> None:
        self._closed[handle.key] = handle.offset
        if len(self._closed) > self.limits.remembered:
            del self._closed[next(iter(self._closed))]
        with contextlib.suppress(OSError):
            os.close(handle.fd)

    # ------------------------------------------------------------------ lines

    def _read(self, handle: _Handle, budget: int, now: float, out: Polled) -> int:
        """Read up to ``budget`` new bytes of ``handle`` into complete lines; the bytes read."""
        if budget <= 0:
            return 0
        try:
            data = os.pread(handle.fd, budget, handle.offset)
        except OSError as exc:
            self._once(("read", handle.path), logging.WARNING, "follow: cannot read %s (%s)", handle.path, exc)
            return 0
        if not data:
            return 0
        handle.offset += len(data)
        handle.last_data, handle.unsettled = now, True
        out.bytes_read += len(data)
        self._split(handle, data, out.lines)
        return len(data)

    def _split(self, handle: _Handle, data: bytes, lines: list[TailLine]) -> None:
        limit, start = self.limits.max_line_bytes, 0
        while (end := data.find(b"\n", start)) >= 0:
            if handle.skipping:
                handle.skipping = False
            elif handle.partial:
                handle.partial += data[start : min(end, start + limit)]
                self._emit(handle, bytes(handle.partial[:limit]), lines)
                handle.partial.clear()
            else:
                self._emit(handle, data[start : min(end, start + limit)], lines)
            start = end + 1
        if start < len(data) and not handle.skipping:
            handle.partial += data[start : start + limit + 1]
            if len(handle.partial) > limit:  # a line longer than the limit: its first part, the rest dropped
                self._emit(handle, bytes(handle.partial[:limit]), lines)
                handle.partial.clear()
                handle.skipping = True

    def _emit(self, handle: _Handle, raw: bytes, lines: list[TailLine]) -> None:
        if handle.number is not None:
            handle.number += 1
        text = raw.decode("utf-8", errors="replace")
        lines.append(TailLine(handle.path, handle.number, text.removesuffix("\r")))

    def _settle(self, handle: _Handle, now: float, out: Polled) -> None:
        """A file without new bytes: after quiet_s its unended line is taken, and it counts as quiet once."""
        if handle.unsettled and now - handle.last_data >= self.limits.quiet_s:
            self._take_partial(handle, out)
            handle.unsettled = False

    def _take_partial(self, handle: _Handle, out: Polled) -> None:
        """The line not yet ended taken as it is (the file went quiet, was truncated, or ended): the file counts
        as quiet."""
        if handle.partial:
            self._emit(handle, bytes(handle.partial), out.lines)
            handle.partial.clear()
        handle.skipping = False
        if handle.path not in out.quiet:
            out.quiet.append(handle.path)


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


def _stat(path: str) -> os.stat_result | None:
    """A regular file's stat; None for anything else, or nothing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _start_of_last_line(fd: int, size: int, limits: Limits) -> tuple[int, int | None, bool]:
    """Where a file found at start-up is read from: after its last newline (a line still being written is read
    whole), its lines before that counted when it is small enough; and whether that start is inside a line."""
    tail = os.pread(fd, min(size, limits.max_line_bytes), max(0, size - limits.max_line_bytes))
    cut = tail.rfind(b"\n")
    offset = size - len(tail) + cut + 1 if cut >= 0 else size
    inside = cut < 0 and size > len(tail)  # no newline in the last max_line_bytes: the start of that line is lost
    if size > limits.count_lines_up_to:
        return offset, None, inside
    count, position = 0, 0
    while position < offset:
        chunk = os.pread(fd, min(1 << 20, offset - position), position)
        if not chunk:
            break
        count += chunk.count(b"\n")
        position += len(chunk)
    return offset, count, inside
