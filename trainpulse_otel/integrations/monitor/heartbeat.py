"""Rank heartbeats: each rank's last completed step and what it is doing now, sent while its step is blocked.

A hung job is a rank that stopped while the others wait for it inside a collective, where no
step ends and no report is sent. So each rank's monitor sends a heartbeat from a thread of its
own every ``period_s`` (at most ``MAX_PERIOD_S``): ``global_step``, ``phase`` (what the recorder
says it does now), ``phase_since``, its ``pid`` and, once it has stayed in one phase for a few
median steps, its training thread's ``stack`` (:mod:`.stack`). The training thread only stores the phase
tuple (:mod:`.recorder`); building and sending happen here, and no collective is used:

- REST (``endpoint=``): every rank posts ``{"ranks": [its heartbeat]}`` through its own
  non-blocking :class:`~.sender.RestSender`;
- in-process: ranks other than 0 write theirs into the job's rendezvous store
  (:class:`StoreChannel`: the c10d ``TCPStore`` at ``MASTER_ADDR:MASTER_PORT``, or any
  ``torch.distributed.Store`` given), which answers from its own thread while every training
  thread is blocked; rank 0's pipeline reads them every tick, forwarding only those younger than
  ``STALE_AFTER_S``.

The phases, the store's keys and the costs: docs/instrumentation.md ("Rank heartbeats").
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from time import perf_counter, time
from typing import Any

from ...samples import RankSample, parse_rank, to_dict
from .distributed import World
from .recorder import StepRecorder
from .stack import StepPace, stack_after_s, thread_stack

log = logging.getLogger(__name__)

MAX_PERIOD_S = 5.0
DEFAULT_PERIOD_S = 2.0
STORE_PREFIX = "trainpulse/heartbeat/"
STORE_TIMEOUT_S = 10.0
#: A heartbeat in the store older than this (three of the longest periods) is a rank that stopped sending.
STALE_AFTER_S = 3 * MAX_PERIOD_S
#: Rank 0 reads the store at most this often (its ticks may come every few tens of ms; heartbeats do not).
READ_EVERY_S = 0.5


class RankState:
    """Reads this rank's heartbeat off the recorder (any thread); ``thread_id`` is the training thread's."""

    def __init__(self, recorder: StepRecorder, world: World, thread_id: int | None = None) -> None:
        self._recorder = recorder
        self._world = world
        self._thread_id = threading.get_ident() if thread_id is None else thread_id
        self._pace = StepPace()
        self._pace_lock = threading.Lock()  # the heartbeat thread and rank 0's tick thread both beat
        self._hostname = socket.gethostname()
        self._pid = os.getpid()
        self._to_unix = time() - perf_counter()  # once: a blocked rank's phase_since must not jitter
        self.closed = False

    def beat(self) -> RankSample:
        """The heartbeat now; ``idle`` once the monitor is closed."""
        recorder = self._recorder
        name, since = recorder.now
        now = perf_counter()
        if self.closed:
            name, since = "idle", now
        with self._pace_lock:
            self._pace.note(recorder.steps, now)
            median_s = self._pace.median_s
        stuck = name != "idle" and now - since > stack_after_s(median_s)
        return RankSample(
            rank=self._world.rank,
            gpu_index=self._world.local_rank,
            hostname=self._hostname,
            global_step=max(0, recorder.step_base + recorder.steps),
            phase=name,
            phase_since=round(max(0.0, self._to_unix + since), 3),
            pid=self._pid,
            stack=thread_stack(self._thread_id) if stuck else None,
        )


class HeartbeatThread:
    """Calls ``send(beat())`` every ``period_s`` from a daemon thread, and once more, ``idle``, on stop."""

    def __init__(self, state: RankState, send: Callable[[RankSample], None], period_s: float) -> None:
        self._state = state
        self._send = send
        self._period_s = min(MAX_PERIOD_S, max(0.05, period_s))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainpulse-heartbeat", daemon=True)
        self.sent = 0
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self._send_one()

    def _send_one(self) -> None:
        try:
            self._send(self._state.beat())
            self.sent += 1
        except Exception:
            log.debug("sending a heartbeat failed", exc_info=True)

    def stop(self) -> None:
        """Stop the thread and send the closing ``idle`` heartbeat."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._state.closed = True
        self._send_one()


def rest_send(sender: Any) -> Callable[[RankSample], None]:
    """Heartbeats into a :class:`~.sender.RestSender` as a ranks-only report."""
    return lambda beat: sender.submit({"ranks": [to_dict(beat)]})


class StoreChannel:
    """Heartbeats through a ``torch.distributed`` store: ``put`` on any rank, ``read`` on rank 0.

    The store client is made lazily, on the heartbeat or tick thread, so a
    slow rendezvous host never delays ``TrainingMonitor()``.
    """

    def __init__(self, world: World, store: Any = None, environ: Mapping[str, str] | None = None) -> None:
        self._world = world
        self._store = store
        self._env = os.environ if environ is None else environ
        self._seen: set[int] = set()
        self._failed = False
        self._sent_at: dict[int, float] = {}
        self._read_at = float("-inf")
        self._last: tuple[RankSample, ...] = ()
        #: New heartbeats read, per rank.
        self.received: dict[int, int] = {}

    def put(self, beat: RankSample) -> None:
        store = self._client()
        if store is not None:
            store.set(f"{STORE_PREFIX}{beat.rank}", json.dumps({"sent_at": time(), "rank": to_dict(beat)}))

    def read(self) -> tuple[RankSample, ...]:
        """The latest heartbeat every other rank has written (none where the store cannot be reached); the
        store is asked at most every ``READ_EVERY_S``, in between the last answer stands."""
        now = time()
        if now - self._read_at < READ_EVERY_S:
            return self._last
        self._read_at = now
        self._last = self._read(now)
        return self._last

    def _read(self, now: float) -> tuple[RankSample, ...]:
        store = self._client()
        if store is None:
            return ()
        others = [r for r in range(self._world.world_size) if r != self._world.rank]
        try:
            self._seen.update(r for r in others if r not in self._seen and store.check([f"{STORE_PREFIX}{r}"]))
            found = [f"{STORE_PREFIX}{r}" for r in others if r in self._seen]  # a written key stays
            values = store.multi_get(found) if found else []
        except Exception:
            log.debug("reading heartbeats from the store failed", exc_info=True)
            return ()
        beats = []
        for raw in values:
            sent_at, beat = _parsed(raw)
            if beat is None or sent_at < now - STALE_AFTER_S:
                continue
            if sent_at != self._sent_at.get(beat.rank):
                self._sent_at[beat.rank] = sent_at
                self.received[beat.rank] = self.received.get(beat.rank, 0) + 1
            beats.append(beat)
        return tuple(beats)

    def _client(self) -> Any:
        if self._store is not None or self._failed:
            return self._store
        host, port = self._env.get("MASTER_ADDR"), self._env.get("MASTER_PORT")
        if not host or not port:
            self._failed = True
            log.warning(
                "rank heartbeats of the other ranks need MASTER_ADDR/MASTER_PORT (torchrun, env://) or "
                "TrainingMonitor(heartbeat_store=...) in in-process mode; only rank 0's own heartbeat is seen"
            )
            return None
        import torch.distributed as dist

        try:
            self._store = dist.TCPStore(
                host,
                int(port),
                is_master=False,
                timeout=datetime.timedelta(seconds=STORE_TIMEOUT_S),
                wait_for_workers=False,
            )
        except (RuntimeError, ValueError, OSError):
            self._failed = True
            log.warning("cannot reach the rendezvous store at %s:%s for rank heartbeats", host, port, exc_info=True)
        return self._store


def _parsed(raw: bytes) -> tuple[float, RankSample | None]:
    """A store entry's send time and heartbeat; ``(0, None)`` for anything malformed."""
    try:
        entry = json.loads(raw)
        sent_at = entry["sent_at"]
        if isinstance(sent_at, bool) or not isinstance(sent_at, (int, float)):
            return 0.0, None
        return float(sent_at), parse_rank(entry["rank"], "heartbeat")
    except (ValueError, KeyError, TypeError):  # malformed JSON or entry, or a SampleError
        return 0.0, None
