"""Failure lines: what a job's output says when a collective, the transport, memory, a process or a GPU fails.

:class:`FailureScanner` reads one stream's lines and tells each failure as a :class:`Failure` (an event kind of
:mod:`trainpulse_otel.samples.events`, the details the line gives, the rank or GPU it names). One-line failures are
told at their line; a multi-line report (a Python traceback, torchrun's failure table) at the line after it ends,
quoting the line that says it (``text``). One failure is told once: the fatal and summary lines NCCL prints after
a timeout, the ``what():`` that repeats it and the same error repeated by the exception that carries it are
claimed and tell nothing. A traceback is a crash (``process_failed``) unless its exception is a timeout's or
torchrun's ChildFailedError (its table tells each rank); one that ends in a CUDA OOM or a transport error is both.
The launcher's restarts and a checkpoint's load are events too. Pure: a few substring checks per line before any
regex; the forms read and their sources: tests/fixtures/logs/SOURCES.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..samples import (
    CHECKPOINT_LOADED,
    CUDA_OOM,
    DRIVER_XID,
    GPU_FAULT,
    JOB_CANCELLED,
    PROCESS_FAILED,
    PROGRESS_GAP,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    WORKERS_RESTARTED,
)
from . import checkpoints, cpp, fatal, launcher, runtimes, stores, words
from . import collectives as c
from .echoes import ECHOES, WATCHDOG_ECHOES, cut_short
from .failure import Failure
from .gpu_faults import GPU_MARKS, gpu_fault
from .lines import named_rank, nccl_host, nccl_process, nccl_rank
from .marks import Words
from .oom import OOM_MARKS, UnplacedOom, cuda_oom
from .sockets import SOCKET_MARKS, socket_failure
from .tracebacks import Told, TorchrunReport, Tracebacks, collective_exception, exception_details, exception_words
from .xid import xid_details

#: Failures a stream remembers having told (oldest forgotten first): bounded memory for a stream that never ends.
MAX_REMEMBERED = 256
#: NCCL's detail follows its ``ncclRemoteError`` line within this many lines (``Last error:`` not counted).
REMOTE_LINES = 1
#: NCCL retries a refused connection (``Call to connect returned Connection refused, retrying``) up to
#: ``NCCL_SOCKET_RETRY_CNT`` (34) times; this many retries in one stream say the peer stays unreachable: a transport
#: error (one or two are a peer still starting).
CONNECT_RETRIES = 5


class FailureScanner:
    """One stream's failure lines (a fresh instance per stream: multi-line reports keep state)."""

    def __init__(self) -> None:
        self._tracebacks = Tracebacks()
        self._report = TorchrunReport()
        self._seen: dict[tuple, None] = {}
        self._timed_out = False  # a timeout was told: NCCL's fatal line after it is its echo
        self._remote: str | None = None  # an 'ncclRemoteError' line waiting for its 'Last error:' detail
        self._remote_wait = 0
        self._retries = 0  # NCCL's connection retries seen
        self._cut: str | None = None  # a long failure line a terminal's wrap cut, waiting for its end
        self._previous = ""  # the line before (a C++ exception's message, before its trailer)
        self._error_line: str | None = None  # a glog error line nobody read, until the next line
        self._quiet = cpp.ECHO_LINES + 1  # lines since a failure was last told
        self._guess: tuple[str, dict[str, Any], str, int] | None = None  # an error line's words, lines left to wait
        self._level: str | None = None  # the glog level of the line being read
        self._processes: dict[str, tuple[int, int]] = {}  # NCCL's ``host:pid`` -> (nranks, rank) its INFO lines said
        self._unplaced = UnplacedOom()  # an OOM naming no GPU (TensorFlow's, Ascend's), until a line after names it

    def feed(self, text: str, level: str | None = None) -> list[Failure] | None:
        """The failures ``text`` completes (``[]``: a failure report's line that completes none), or None when
        the line is no failure report's. ``level``: the glog level its prefix gave (``I``, ``W``, ``E``, ``F``): a
        traceback a warning begins is a handled exception's; an error's words may be a failure's (:mod:`.words`)."""
        warned, self._level = level in ("I", "W"), level
        if warned:
            self._tracebacks.warned()
        if self._cut is not None:  # the line before was cut where a terminal wrapped it: this one may end it
            cut, self._cut = self._cut, None
            joined = self._one_line(cut + text, join=False)
            if joined:
                return joined
        previous, self._previous = self._previous, text
        self._quiet += 1
        out: list[Failure] = self._unplaced.feed(text)
        claimed = self._reports(text, out)
        pending = self._remote
        # a torchrun table's lines quote a rank's error (its error_file): the rank's own lines told it
        one = None if claimed and self._report.active else self._one_line(text)
        if pending is not None and self._remote is pending and "Last error:" not in text:
            self._remote_wait -= 1
            if self._remote_wait <= 0:  # the line after 'Last error:' was no transport's: tell the error as it is
                out += self._remote_error()
        if one is None and (where := cpp.raised_from(text)) is not None:
            one = self._c10(self._error_line or previous, where)
        self._error_line = text if one is None and not claimed and cpp.error_line(text) else None
        if one is not None:
            out += one
            claimed = True
        if self._guess is not None:
            out += self._guessed(read=bool(out))
        elif not claimed and not self._seen and not warned and (said := words.error_said(text, level)) is not None:
            self._guess, claimed = (*said, text, words.GUESS_LINES), True
        if out:
            self._quiet, out = 0, self._unplaced.release() + out  # (a held OOM came first)
        return out if claimed or out else None

    def _c10(self, previous: str, where: str) -> list[Failure]:
        """A C++ exception's trailer (``Exception raised from OperationSetup at …``): its message is the line before
        it. A crash unless a failure was told in the lines just before (the trailer of that one's exception); the
        watchdog's own (``checkTimeout``, its line wrapped or told by another rank's stream) is a timeout, the
        store's socket's (``recvBytes``) a transport error."""
        if self._quiet <= cpp.ECHO_LINES or not previous.strip():
            return []
        message = cpp.message(previous)
        if (kind := cpp.RAISER_KINDS.get(where)) is not None:  # (its message may be another stream's line)
            return self._words(kind, {"error": f"raised from {where}: {message}"[:200]}, previous)
        return self._once(
            ("c10", message),
            Failure(PROCESS_FAILED, {"exception": "c10::Error", "error": message, "raised_from": where}),
        )

    def _guessed(self, read: bool) -> list[Failure]:
        """The stream's first error line no form read, classed by its words (:mod:`.words`): dropped when a form
        reads a failure within :data:`~.words.GUESS_LINES` lines (the exception's own detail), else told then."""
        kind, details, text, left = self._guess or ("", {}, "", 0)
        self._guess = None if read or left <= 1 else (kind, details, text, left - 1)
        return [] if read or self._guess is not None else self._words(kind, details, text)

    def _words(self, kind: str, details: dict[str, Any], text: str, rank: int | None = None) -> list[Failure]:
        """A failure a line's words (:mod:`.words`) or a runtime's form (:mod:`.runtimes`) told, by its kind."""
        rank = named_rank(text) if rank is None else rank
        if kind == "crash":
            self._seen[("guessed",)] = None  # (the crash is told as a traceback's is: not once per key)
            return self._crash(Told(details, rank=rank, text=text.strip()))
        if kind == "timeout":
            return self._timeout(details, ("said", details.get("error")))
        kind = {"oom": CUDA_OOM, "gpu": GPU_FAULT, "xid": DRIVER_XID, "hang": PROGRESS_GAP}.get(kind, TRANSPORT_ERROR)
        return self._once(("said", kind, details.get("error")), Failure(kind, details, rank=rank))

    def flush(self) -> list[Failure]:
        """What a stream that ended still holds: a traceback's exception, a torchrun entry, an NCCL error."""
        out = [f for t in self._tracebacks.flush(end=True) + self._report.flush() for f in self._crash(t)]
        guess, self._guess = self._guess, None
        held = self._unplaced.release()
        return held + out + self._remote_error() + ([] if guess is None else self._words(*guess[:3]))

    def _reports(self, text: str, out: list[Failure]) -> bool:
        """The multi-line reports: torchrun's table (while one is open, every line is its), tracebacks."""
        if self._report.active:
            claimed, told = self._report.feed(text)
            out += [f for t in told for f in self._crash(t)]
            if claimed:
                return True
            return self._traceback(text, out)  # the line that closed the table is someone else's
        claimed = self._traceback(text, out)
        return self._report.feed(text)[0] or claimed

    def _traceback(self, text: str, out: list[Failure]) -> bool:
        claimed, told = self._tracebacks.feed(text)
        out += [f for t in told for f in self._crash(t)]
        return claimed

    def _crash(self, told: Told) -> list[Failure]:
        """A crash; one raised by a collective whose words say it timed out or lost its link, or one whose exception is
        an OOM (a torchrun table's entry), where no line before said so, is that failure too (the crash its
        consequence): a wording no form reads still names its class."""
        if told.details.get("exception") == "KeyboardInterrupt":  # a user's ^C: the job was stopped, not crashed
            return self._once(("interrupted",), Failure(JOB_CANCELLED, {"reason": "interrupted", "end": "kill"}))
        if told.rank is None and told.text and (named := named_rank(told.text)) is not None:
            told = Told(told.details, named, told.text)  # the exception names its rank (spawn's ``process 3 …``)
        died_of = collective_exception(told.details)
        details = told.details if died_of is None else {**told.details, "collective": True}
        crash = Failure(PROCESS_FAILED, details, rank=told.rank, text=told.text)
        said = {"error": exception_words(details)[:200], "from_exception": True}
        if died_of == "timeout" and not self._timed_out:  # (its words may be the watchdog's own: its work and rank)
            return [*self._timeout({**(c.watchdog(said["error"]) or {}), **said}, ("exception", told.rank)), crash]
        if died_of == "link" and not self._told_transport():
            return [*self._once(("exception", told.rank), Failure(TRANSPORT_ERROR, said, rank=told.rank)), crash]
        if died_of is None and (oom := cuda_oom(said["error"])) is not None and self._oom_untold(told):
            return [*self._once(("oom", told.rank), Failure(CUDA_OOM, oom[0], rank=told.rank, gpu_index=oom[1])), crash]
        return [crash]

    def _oom_untold(self, told: Told) -> bool:
        """Whether a crash's OOM is news: a torchrun table entry's is its rank's; a traceback's line was read already."""
        return "root_cause" in told.details or not any(key[0] == "oom" for key in self._seen)

    @property
    def holding(self) -> bool:
        """Whether it holds a line the next line of its file may go on with: one a terminal's wrap cut
        (:func:`.echoes.cut_short`), or an error nobody read whose C++ trailer may follow (printed without the prefix)."""
        return self._cut is not None or self._error_line is not None

    def _one_line(self, text: str, join: bool = True) -> list[Failure] | None:
        """The failures one line tells by itself (first form that matches wins); a long line a failure's words
        begin but that no form reads is held, to be read with the next line (``join``)."""
        if "NCCL INFO" in text:
            if (said := nccl_rank(text)) is not None and len(self._processes) < MAX_REMEMBERED:
                self._processes[said[0]] = max(self._processes.get(said[0], (0, 0)), (said[2], said[1]))
            if " -> 2" in text and not self._told_transport():  # no warning said it
                return self._transport(c.nccl_trace(text), text)  # an error code returned up its stack
            return self._retry(text) if "retrying" in text else None
        if not _MARKED.said_in(text):  # no handler's words: the common case
            if any(echo in text for echo in ECHOES):
                return self._echo(text)
            if join and cut_short(text):
                self._cut = text
                return []
            return None
        for marks, handler in self._handlers:
            if any(mark in text for mark in marks):
                told = handler(self, text)
                if told is not None:
                    return told
        if any(echo in text for echo in ECHOES):
            return self._echo(text)
        if join and cut_short(text):
            self._cut = text
            return []
        return None

    def _watchdog(self, text: str) -> list[Failure] | None:
        details = c.watchdog(text)
        if details is None:
            return None
        work = c.WORK_RANK.search(text)  # the text the re-throw repeats word for word, so its key
        key = ("timeout", int(work[1]) if work else details.get("pg_rank"), details.get("seq"), details.get("op"))
        return self._timeout(details, key)

    def _fatal(self, text: str) -> list[Failure] | None:
        details = c.fatal_exit(text)
        if details is None:
            return None
        return [] if self._timed_out else self._timeout(details, ("fatal", details.get("pg_id")))

    def _stalled(self, text: str) -> list[Failure] | None:
        details = c.stalled_collective(text)
        if details is None:
            return None
        if "seq" in details and self._timed_out:  # NCCL's summary of a timeout already told
            return []
        key = (
            "stalled",
            details["backend"],
            tuple(details.get("missing_ranks", ())),
            tuple(details.get("behind_ranks", ())),
        )
        return self._timeout(details, key)

    def _echo(self, text: str) -> list[Failure]:
        """An echo line: nothing new, but a watchdog's word where no line before told a failure (a timeout)."""
        if self._seen or not any(echo in text for echo in WATCHDOG_ECHOES):
            return []
        details: dict[str, Any] = {"backend": "nccl", "error": text.strip()[:200], "from_echo": True}
        if (seq := c.WORK_SEQ.search(text)) is not None:
            details["seq"] = int(seq[1])
        return self._timeout(details, ("echo",))

    def _timed(self, details: dict[str, Any] | None, name: str) -> list[Failure] | None:
        """A timeout a form read (None: none), told once per its ``name`` and timeout."""
        return None if details is None else self._timeout(details, (name, details.get(name), details.get("timeout_ms")))

    def _timeout(self, details: dict[str, Any], key: tuple) -> list[Failure]:
        self._timed_out = True
        return self._once(key, Failure(WATCHDOG_TIMEOUT, details))

    def _oom(self, text: str) -> list[Failure] | None:
        found = cuda_oom(text)
        if found is None:
            return None
        details, gpu = found
        key = ("oom", gpu, details.get("requested_bytes"), details.get("free_bytes"))
        told = self._once(key, Failure(CUDA_OOM, details, rank=named_rank(text), gpu_index=gpu))
        return self._unplaced.hold(told, text)  # (TensorFlow's and Ascend's name the GPU on a line after)

    def _transport(self, details: dict[str, Any] | None, text: str) -> list[Failure] | None:
        if details is None:
            return None
        if self._remote is not None or "ncclRemoteError" in text:  # the 'Last error:' detail of an ncclRemoteError
            details["nccl_error"], self._remote = "ncclRemoteError", None
        if (host := nccl_host(text)) is not None:
            details["host"] = host  # evidence, like torchrun's table's: the subject stays the line's rank and node
        key = tuple(details.get(name) for name in ("transport", "peer", "error", "status", "event"))
        rank = self._processes.get(nccl_process(text) or "", (0, None))[1]  # its rank in its largest communicator
        return self._once(("transport", *key), Failure(TRANSPORT_ERROR, details, rank=rank))

    def _retry(self, text: str) -> list[Failure] | None:
        """NCCL retrying a connection: told as a transport error at the :data:`CONNECT_RETRIES` th retry."""
        reason = c.connect_retry(text)
        if reason is None:
            return None
        self._retries += 1
        if self._retries < CONNECT_RETRIES:
            return []
        details = {"transport": "Socket", "error": reason, "op": "connect", "retries": self._retries}
        return self._once(("retry", reason), Failure(TRANSPORT_ERROR, details))

    def _nccl_remote(self, text: str) -> list[Failure] | None:
        if any(word in text for word in c.NCCL_NET_ERRORS):
            self._remote, self._remote_wait = text.strip(), REMOTE_LINES
            return []
        return [] if self._remote is not None else None  # 'Last error:' of an ncclRemoteError

    def _remote_error(self) -> list[Failure]:
        """An NCCL error of the network no transport line detailed (ncclRemoteError: or a peer died)."""
        held, self._remote = self._remote, None
        if held is None:
            return []
        error = "ncclRemoteError" if "ncclRemoteError" in held else "ncclSystemError"
        return self._once(("remote", held), Failure(TRANSPORT_ERROR, {"error": error}, text=held))

    def _gpu_fault(self, text: str) -> list[Failure] | None:
        details = gpu_fault(text)
        if details is None:
            return None
        rank = named_rank(text)
        key = ("gpu", details["fault"], details.get("pci"), details.get("gpu_index"), rank)
        return self._once(key, Failure(GPU_FAULT, details, rank=rank, gpu_index=details.get("gpu_index")))

    def _died(self, details: dict[str, Any] | None, rank: int | None = None, text: str = "") -> list[Failure] | None:
        """A one-line death (:mod:`.fatal`): told once per what it says in this stream."""
        if details is None:
            return None
        said = exception_details(text) if text else None  # a bare exception line says its class too
        if said is not None and said["error"] and said["error"] in str(details.get("error", "")):
            details = {**said, **details}
        rank = rank if rank is not None else named_rank(text)
        if text and "host" not in details and (host := nccl_host(text)) is not None:
            details = {**details, "host": host}  # evidence: the subject stays the line's rank
        key = ("died", rank, details.get("error"), details.get("signal"), details.get("exit_code"))
        failure = Failure(PROCESS_FAILED, {**details, "one_line": True}, rank=rank, gpu_index=details.get("gpu_index"))
        return self._once(key, failure)

    def _restarted(self, text: str) -> list[Failure] | None:
        """The launcher restarting the workers or the scheduler ending the job (the attempt ends), told once."""
        if (found := launcher.workers_restarted(text)) is not None:
            return self._once(("restart", found["remaining"], found.get("role")), Failure(WORKERS_RESTARTED, found))
        if (ended := launcher.job_cancelled(text)) is not None:
            return self._once(("cancelled", ended["job_id"], ended["node"]), Failure(JOB_CANCELLED, ended))
        return None

    def _told_transport(self) -> bool:
        return any(key[0] in ("transport", "remote", "retry") for key in self._seen)

    def _once(self, key: tuple, failure: Failure) -> list[Failure]:
        """``[failure]`` the first time ``key`` is told in this stream, then ``[]`` (claimed, nothing new)."""
        if key in self._seen:
            return []
        self._seen[key] = None
        if len(self._seen) > MAX_REMEMBERED:
            del self._seen[next(iter(self._seen))]
        return [failure]

    #: (substrings one of which must be in the line, the form it may be), in the order they are tried.
    _handlers: tuple[tuple[tuple[str, ...], Callable[[FailureScanner, str], list[Failure] | None]], ...] = (
        (("Watchdog caught", "timed out in blocking wait", "Caught collective operation timeout"), _watchdog),
        (("watchdog got stuck", "Heartbeat monitor timed out"), lambda self, t: self._timed(c.heartbeat(t), "pg_id")),
        (("Terminating the process after attempting",), _fatal),
        (("Timed out waiting", "Application timeout caused"), lambda self, t: self._timed(c.gloo_timeout(t), "op")),
        (c.STALLED_MARKS, _stalled),
        (("Got completion from peer",), lambda self, text: self._transport(c.ib_error(text), text)),
        (OOM_MARKS, _oom),
        (c.IB_EVENT_MARKS, lambda self, t: self._transport(c.ib_event(t) if c.warn_line(t) else None, t)),
        (("gloo/transport/tcp/pair.cc",), lambda self, text: self._transport(c.gloo_error(text), text)),
        (c.VERBS_MARKS, lambda self, text: self._transport(c.verbs_status(text), text)),
        (("Transport init error",), lambda self, text: self._transport(c.hccl_transport(text), text)),
        (c.SOCKET_WARN_MARKS, lambda self, t: self._transport(c.socket_error(t) if c.warn_line(t) else None, t)),
        (stores.MARKS, lambda self, t: [] if stores.retried(t, self._level) else self._transport(stores.failure(t), t)),
        (SOCKET_MARKS, lambda self, t: self._transport(socket_failure(t), t)),
        ((*c.NCCL_NET_ERRORS, "Last error:"), _nccl_remote),
        (("WARN",), lambda self, text: self._transport(c.transport_warning(text), text)),
        (("NVRM: Xid",), lambda self, t: None if (xid := xid_details(t)) is None else [Failure(DRIVER_XID, xid)]),
        (GPU_MARKS, _gpu_fault),
        (fatal.CUDA_MARKS, lambda self, t: self._died(fatal.cuda_error(t), text=t)),
        (fatal.EXIT_MARKS, lambda self, t: self._died(fatal.launcher_exit(t))),
        (("srun: error",), lambda self, t: self._died(*(fatal.srun_failure(t) or (None,)))),
        ((" noticed that process rank",), lambda self, t: self._died(*(fatal.mpirun_death(t) or (None,)))),
        ((launcher.MARK, launcher.CANCELLED_MARK), lambda self, t: self._restarted(t)),
        (checkpoints.LOAD_MARKS, lambda self, t: _loaded(checkpoints.checkpoint_said(t))),
        (fatal.HOST_OOM, lambda self, t: self._died(fatal.host_oom(t))),
        (fatal.LOADER_MARKS, lambda self, t: self._died(fatal.loader_death(t), text=t)),
        (fatal.STORAGE_MARKS, lambda self, t: self._died(fatal.storage_error(t), text=t)),
        (fatal.DEATH_MARKS, lambda self, t: self._died(fatal.death(t), text=t)),
        (
            runtimes.MARKS,
            lambda self, t: None if (said := runtimes.failure_said(t)) is None else self._words(*said[:2], t, said[2]),
        ),
    )


#: Every handler's words: a line holding none is no failure line of one, tested once per shape (:class:`.marks.Words`).
MARKS = tuple(dict.fromkeys(mark for marks, _ in FailureScanner._handlers for mark in marks))
_MARKED = Words(MARKS)


def _loaded(said: tuple[str, dict[str, Any]] | None) -> list[Failure] | None:
    return [Failure(CHECKPOINT_LOADED, said[1])] if said is not None and said[0] == "load" else None
