"""The job's life kept on disk (``-state-dir``), so a daemon restarted mid-job continues it.

One file, ``DIR/trainpulse-state.json``, holds a versioned envelope around the pipeline's
:meth:`~trainpulse_otel.diagnose.DiagnosticPipeline.life_state` — the attempts, what goodput booked, the
ideal step, the checkpoints seen — and the job id it belongs to. It is written atomically (a temporary file
in the same directory, flushed to disk, then renamed over the old one), so a daemon killed mid-write leaves
the previous state whole. A file that cannot be read, is not a state, was written by a newer TrainPulse or
belongs to another job is **set aside** (renamed ``trainpulse-state.json.<reason>-<time>``) with one
warning naming the reason, and the daemon starts a fresh life: a state file is never fatal.
The format: docs/job-life.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: The state's file name in the directory, its format's name and version.
STATE_FILE = "trainpulse-state.json"
FORMAT = "trainpulse.job-life"
VERSION = 1
#: The largest state file read (a running attempt keeps 512 progress points: a state is tens of kB).
MAX_STATE_BYTES = 16 << 20
#: How often a running daemon writes the state (seconds; and once more when it stops).
SAVE_EVERY_S = 10.0


class LifeHolder(Protocol):
    """What keeps a job's life: the diagnostic pipeline."""

    def life_state(self) -> dict[str, Any]: ...

    def restore_life(self, state: Mapping[str, Any]) -> None: ...


class LifeStore:
    """The state file of one directory, for the job ``job_id`` (None: whichever job the file holds)."""

    def __init__(self, state_dir: str | os.PathLike[str], job_id: str | None = None) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        self.job_id = job_id

    def load(self) -> Mapping[str, Any] | None:
        """The saved life, None when there is none or the file was set aside (:meth:`set_aside`)."""
        try:
            if self.path.stat().st_size > MAX_STATE_BYTES:
                self.set_aside("too-large", f"it is over {MAX_STATE_BYTES} bytes")
                return None
            with self.path.open("rb") as fh:
                envelope = json.load(fh)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("job life state %s cannot be read (%s): starting a fresh life", self.path, exc.strerror)
            return None
        except (ValueError, RecursionError) as exc:
            self.set_aside("corrupt", f"it is not JSON ({exc})")
            return None
        return self._checked(envelope)

    def _checked(self, envelope: Any) -> Mapping[str, Any] | None:
        if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
            self.set_aside("foreign", f"it is not a {FORMAT} file")
            return None
        version = envelope.get("version")
        if not isinstance(version, int) or version > VERSION or version < 1:
            self.set_aside("foreign", f"its version {version!r} is not one this TrainPulse reads ({VERSION})")
            return None
        held = envelope.get("job_id")
        if self.job_id is not None and held is not None and held != self.job_id:
            self.set_aside("foreign", f"it belongs to job {held!r}, not {self.job_id!r}")
            return None
        state = envelope.get("life")
        if not isinstance(state, dict):
            self.set_aside("corrupt", "it holds no life")
            return None
        return state

    def set_aside(self, reason: str, why: str) -> None:
        """Rename the file out of the way (``STATE_FILE.<reason>-<unix time>``), saying why; a fresh life follows."""
        aside = self.path.with_name(f"{STATE_FILE}.{reason}-{int(time.time())}")
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            log.warning("job life state %s is unusable (%s) and cannot be moved (%s)", self.path, why, exc.strerror)
            return
        log.warning("job life state %s set aside as %s: %s; starting a fresh life", self.path, aside.name, why)

    def save(self, state: Mapping[str, Any], now: float | None = None) -> None:
        """Write ``state`` atomically (OSError when the directory cannot be written)."""
        envelope = {
            "format": FORMAT,
            "version": VERSION,
            "job_id": self.job_id,
            "saved_at": time.time() if now is None else now,
            "life": state,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(envelope, fh, separators=(",", ":"), allow_nan=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


class LifeKeeper:
    """A running daemon's side of the store: the life restored at start, written every :data:`SAVE_EVERY_S`
    after a tick and once more at the end. A write that fails is logged (once until one succeeds), never fatal."""

    def __init__(self, store: LifeStore, holder: LifeHolder, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.holder = holder
        self.clock = clock
        self._saved_at = clock()
        self._failing = False

    def restore(self) -> bool:
        """Continue the saved life, if there is one; True when one was restored."""
        state = self.store.load()
        if state is None:
            return False
        try:
            self.holder.restore_life(state)
        except ValueError as exc:
            self.store.set_aside("corrupt", str(exc))
            return False
        log.info("job life continued from %s", self.store.path)
        return True

    def after_tick(self) -> None:
        """Write the state when :data:`SAVE_EVERY_S` have passed since the last write."""
        if self.clock() - self._saved_at >= SAVE_EVERY_S:
            self.save()

    def save(self) -> None:
        """Write the state now."""
        self._saved_at = self.clock()
        try:
            self.store.save(self.holder.life_state())
        except (OSError, ValueError) as exc:  # ValueError: a non-finite figure JSON refuses
            if not self._failing:
                log.warning("job life state %s cannot be written: %s", self.store.path, exc)
            self._failing = True
            return
        self._failing = False
