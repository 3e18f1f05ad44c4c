"""Actions run at the edge: a command or a webhook per decision, on one worker thread, never in the tick.

:meth:`ActionRunner.offer` runs on the tick's thread and only decides
(:class:`~.policy.ActionPolicy`) and queues: a bounded queue, and when it is
full the run is dropped (logged, counted ``dropped``). The worker runs each
command in its own process group, with the signal's JSON on its standard
input and the ``TRAINPULSE_*`` variables in its environment (the daemon's
own environment beside them); past its ``timeout`` the whole group is killed.
A webhook gets the same JSON by POST. Every decision is one log line (action,
signal, subject, outcome, duration) and one count of
``trainpulse.actions{action,outcome}``: ``ok``, ``failed``, ``timeout``,
``dropped``, ``dry_run``, ``cooldown``. With ``dry_run`` nothing runs: the
line says what would have.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from ..config.values import Action
from ..diagnose import PipelineResult
from .policy import COOLDOWN, RUN, ActionPolicy, Decision, subject_key

log = logging.getLogger(__name__)

#: Runs waiting for the worker at most; past this a run is dropped.
QUEUE_SIZE = 64
#: The most of a failing command's output a log line quotes.
OUTPUT_TAIL = 300
OK, FAILED, TIMEOUT, DROPPED, DRY_RUN = "ok", "failed", "timeout", "dropped", "dry_run"
#: ``count(action, outcome)``: the ``trainpulse.actions`` counter.
Count = Callable[[str, str], None]


class ActionRunner:
    """The configured actions of one daemon: decided on the tick's thread, run on a worker thread."""

    def __init__(
        self, actions: Sequence[Action], count: Count, dry_run: bool = False, queue_size: int = QUEUE_SIZE
    ) -> None:
        self.policy = ActionPolicy(actions)
        self.count = count
        self.dry_run = dry_run
        self._queue: queue.Queue[Decision | None] = queue.Queue(queue_size)
        self._running: set[int] = set()  # the process groups of the commands running now
        self._stopped = threading.Event()
        self._worker = threading.Thread(target=self._work, name="trainpulse-actions", daemon=True)
        self._worker.start()

    def offer(self, result: PipelineResult, now: float, warming: bool = False) -> None:
        """Decide what one tick's transitions call for, and queue the runs (never waits)."""
        for decision in self.policy.decide(result, now, warming):
            if decision.verdict == RUN and not self.dry_run:
                try:
                    self._queue.put_nowait(decision)
                except queue.Full:
                    self._done(decision, DROPPED, 0.0, f"{self._queue.maxsize} runs wait already")
            elif decision.verdict == RUN:
                self._done(decision, DRY_RUN, 0.0, f"would {describe(decision.action)}")
            elif decision.verdict == COOLDOWN:
                self._done(decision, COOLDOWN, 0.0, f"ran less than {decision.action.cooldown:g}s ago")
            else:
                _line(logging.INFO, decision, "warmup", 0.0, "not run: the diagnosis is warming up")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker once the queued runs are done; past ``timeout_s`` a command still running is killed
        with its process group (a daemon that stops leaves none behind)."""
        with contextlib.suppress(queue.Full):  # full: the worker stops at ``_stopped`` instead
            self._queue.put(None, timeout=timeout_s)
        self._worker.join(timeout_s)
        self._stopped.set()  # what is still queued does not start
        for group in list(self._running):
            log.warning("stopping: killing the process group %d of an action still running", group)
            _kill_group(group)

    def _work(self) -> None:
        while (decision := self._queue.get()) is not None and not self._stopped.is_set():
            started = time.monotonic()
            try:
                outcome, detail = execute(decision, self._running)
            except Exception as exc:  # noqa: BLE001 - the worker must outlive any one action
                outcome, detail = FAILED, f"{type(exc).__name__}: {exc}"
            self._done(decision, outcome, time.monotonic() - started, detail)

    def _done(self, decision: Decision, outcome: str, took_s: float, detail: str) -> None:
        level = logging.WARNING if outcome in (FAILED, TIMEOUT, DROPPED) else logging.INFO
        _line(level, decision, outcome, took_s, detail)
        try:
            self.count(decision.action.name, outcome)
        except Exception:
            log.debug("counting an action failed", exc_info=True)


def _line(level: int, decision: Decision, outcome: str, took_s: float, detail: str) -> None:
    event = decision.event
    log.log(
        level,
        "action %s signal=%s severity=%s subject=%s outcome=%s duration=%.3fs%s",
        decision.action.name,
        event.signal,
        event.severity,
        subject_key(event.subject),
        outcome,
        took_s,
        f" ({detail})" if detail else "",
    )


def describe(action: Action) -> str:
    """What an action does, for a log line (a webhook by its name: its URL may hold a secret)."""
    return f"run {list(action.run)}" if action.run is not None else f"POST the signal to {action.name}"


def execute(decision: Decision, running: set[int] | None = None) -> tuple[str, str]:
    """Run one decision's action: its outcome and a word on it (a command's process group is in ``running``
    while it runs)."""
    body = json.dumps(decision.event.to_dict(decision.action.name), default=str).encode()
    if decision.action.run is not None:
        return run_command(decision.action.run, body, decision.event.environment(), decision.action.timeout, running)
    return post_webhook(decision.action.webhook or "", body, decision.action.timeout)


def run_command(
    argv: Sequence[str], body: bytes, env: dict[str, str], timeout_s: float, running: set[int] | None = None
) -> tuple[str, str]:
    """``argv`` in a new process group, ``body`` on its stdin; past ``timeout_s`` the group is killed."""
    running = set() if running is None else running
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    except OSError as exc:
        return FAILED, f"cannot start {argv[0]}: {exc.strerror or exc}"
    running.add(proc.pid)
    try:
        output, _ = proc.communicate(body, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        try:
            proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:  # a grandchild that left the group still holds the output open
            proc.kill()
        return TIMEOUT, f"killed its process group after {timeout_s:g}s"
    finally:
        running.discard(proc.pid)
    if proc.returncode != 0:
        tail = output.decode(errors="replace").strip()[-OUTPUT_TAIL:]
        return FAILED, f"exit code {proc.returncode}" + (f": {tail}" if tail else "")
    return OK, ""


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pgid, signal.SIGKILL)


def post_webhook(url: str, body: bytes, timeout_s: float) -> tuple[str, str]:
    """POST ``body`` (JSON) to ``url``; a 2xx answer is ``ok``."""
    request = urllib.request.Request(  # noqa: S310 - the settings allow http:// and https:// only
        url, data=body, method="POST", headers={"Content-Type": "application/json", "User-Agent": "trainpulse"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310 - http(s) only
            return OK, f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return FAILED, f"HTTP {exc.code}"
    except TimeoutError:
        return TIMEOUT, f"no answer within {timeout_s:g}s"
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return TIMEOUT, f"no answer within {timeout_s:g}s"
        return FAILED, str(exc.reason)
    except OSError as exc:
        return FAILED, str(exc)
