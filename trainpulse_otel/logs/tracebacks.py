"""Multi-line reports of a dead process: a Python traceback, torchrun's ``ChildFailedError`` table.

:class:`Tracebacks` follows one stream's traceback from ``Traceback (most recent call last):`` through its frames
to the exception line, and holds that exception until the next line says whether a chained traceback follows
(``During handling of the above exception…``, ``The above exception was the direct cause…``): a chain is told
once, by its last exception. :class:`TorchrunReport` reads the agent's table (``Failures:`` / ``Root Cause
(first observed failure):``, entries ``[N]:`` with ``rank``, ``exitcode``, ``error_file``, ``traceback``) and
tells each failed rank once, at the line after its entry. Both hand back :class:`Told` records; :mod:`.failures`
makes them failure events. Pure: lines in.
"""

from __future__ import annotations

import re
import signal as signals
from dataclasses import dataclass, field
from typing import Any

TRACEBACK = "Traceback (most recent call last)"
CHAINS = ("During handling of the above exception", "The above exception was the direct cause")
#: A frame: ``  File "/x/train.py", line 12, in step`` (classic) or ``│ /x/train.py:12 in step`` (rich).
FRAME = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?|^[│|]\s+(?P<rfile>\S+?\.py):(?P<rline>\d+) in (?P<rfunc>\w+)'
)
#: The exception line: a dotted class name that reads as an exception (a bare ``Exception`` too), then ``: message`` or
#: nothing.
EXCEPTION = re.compile(
    r"^(?P<name>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Iteration|Failure|Warning)|Exception))"
    r"(?::\s?(?P<message>.*))?$"
)
#: A line of source a notebook's (IPython's) traceback quotes beside its number: ``   2530     # if loss is nan or
#: inf …``, ``-> 2523     tr_loss_step = …`` (``---> 12 `` before IPython 8): code, not the run's output. (A
#: number, one blank and words is a loop's own line: ``   5 loss: 2.0``.)
SOURCE_CONTEXT = re.compile(r"^\s*(?:-+>\s*\d{1,6} +|\d{1,6} {3,})(?=[#A-Za-z_(\[@'\"])")
#: ``Exception in thread Thread-9:`` and ``-- Process 0 terminated with the following error:`` (mp.spawn).
THREAD = re.compile(r"^Exception in thread (.+?):\s*$")
SPAWNED = re.compile(r"^-- Process (\d+) terminated with the following error:")
#: The launcher's own frames: a traceback cut there is torchrun re-raising its workers' failure, not a crash.
LAUNCHER = re.compile(r"torch/distributed/(?:run\.py|launch\w*|launcher/|elastic/)|/bin/torchrun")
#: Stray lines a traceback tolerates (another thread's output) before it is given up.
MAX_STRAY = 8
#: A ``Told`` error message is its first sentence, at most this long.
MAX_ERROR = 300
#: Exceptions that are another report's news, not a crash of their own: a collective's timeout (the watchdog's
#: event tells it), c10d's store timing out on a peer (``DistStoreError: Socket Timeout``, ``Timed out after 901
#: seconds waiting for clients``: its own line tells it), torchrun's ChildFailedError (its table tells each rank).
NOT_A_CRASH = (
    "Watchdog caught collective operation timeout",
    "Timed out waiting",
    "watchdog got stuck",
    "Socket Timeout",
    "waiting for clients",
    "Wait timeout for key",
    "in store based barrier",
)


@dataclass(frozen=True, slots=True)
class Told:
    """A report completed: its details, the global rank it names (None: the stream's), and the line to quote."""

    details: dict[str, Any]
    rank: int | None = None
    text: str | None = None


#: An exception whose words say a collective or its transport failed under it (the process died of that, not
#: of its own bug): NCCL's, HCCL's or gloo's errors, an aborted communicator, a peer gone.
COLLECTIVE_FAILURE = re.compile(
    r"NCCL|Hccl|HCCL|gloo|ProcessGroup|[Cc]ommunicator|Connection (?:closed|reset) by|Broken pipe|c10d|[Cc]ollective"
    r"|[Bb]arrier|Dist(?:Backend|Store|Network)Error"
)
#: NCCL's results that are no collective's failure but the caller's or the GPU's: ``invalid usage``
#: (``ncclInvalidUsage``: the program's), ``invalid argument``, ``unhandled cuda error`` (a CUDA call failed under it).
OWN_FAULT = re.compile(
    r"invalid usage|invalid argument|unhandled cuda error|ncclInvalid(?:Usage|Argument)|ncclUnhandledCuda"
)
#: Such an exception saying it timed out, or that its connection failed, in any wording.
TIMED_OUT = re.compile(r"[Tt]ime[sd]? ?out|DEADLINE_EXCEEDED|[Dd]eadline ?[Ee]xceeded")
LINK_FAILED = re.compile(
    r"Connection (?:reset|refused|closed|aborted)|Broken pipe|[Nn]etwork is unreachable|No route to"
)


def exception_words(details: dict[str, Any]) -> str:
    """A crash's exception as one line: ``RuntimeError: NCCL error …``."""
    return f"{details.get('exception', '')}: {details.get('error', '')}"


def collective_exception(details: dict[str, Any]) -> str | None:
    """What a crash's exception says a collective died of: ``timeout``, ``link`` (its connection), ``collective``
    (raised inside one, or by its link, no more said), or None: not a collective's."""
    words = exception_words(details)
    if COLLECTIVE_FAILURE.search(words) is None and "distributed_c10d" not in str(details.get("file", "")):
        return None
    if OWN_FAULT.search(words) is not None:
        return None  # NCCL refusing the caller's use of it, or the GPU failing under it: the process's own failure
    if TIMED_OUT.search(words) is not None:
        return "timeout"
    return "link" if LINK_FAILED.search(words) is not None else "collective"


def exception_details(line: str) -> dict[str, Any] | None:
    """``exception`` and ``error`` (the message's first sentence) of an exception line, or None."""
    match = EXCEPTION.match(line.strip())
    if match is None:
        return None
    message = (match["message"] or "").strip()
    return {"exception": match["name"], "error": message.split(". ", 1)[0][:MAX_ERROR]}


class Tracebacks:
    """One stream's Python tracebacks: ``feed`` says whether a line was the traceback's and what it completed.

    Not crashes: a traceback after ``Exception ignored in:`` (a destructor's, at exit). Told with where it ran: a
    thread's (``Exception in thread Thread-9:``); a ``torch.multiprocessing.spawn`` child's (``-- Process 0
    terminated with the following error:``), whose own traceback replaces the parent's re-raise.
    """

    def __init__(self) -> None:
        self.state = "idle"  # idle | frames | ended (exception held) | chained (a cause printed, its effect next)
        self.frames = 0
        self.last: dict[str, Any] = {}
        self.stray = 0
        self.held: Told | None = None
        self.context: dict[str, Any] = {}  # what the line before a traceback said of it (ignored, thread)
        self.where: dict[str, Any] = {}  # the current traceback's context
        self.fallback: Told | None = None  # a spawn parent's re-raise, until its child's traceback ends
        self.prefix = ""  # what stood before the current traceback's head (cut from its lines)
        self.indent = 0  # the indent of its frames' ``File "…"`` lines (a paste may indent a whole traceback)

    def feed(self, text: str) -> tuple[bool, list[Told]]:
        """(whether ``text`` belongs to a traceback, the crashes it completed)."""
        if self.prefix and text.startswith(self.prefix):  # a logger's own prefix before every line of it
            text = text[len(self.prefix) :]
        if self.state == "idle":
            return self._idle(text)
        if self.state == "ended":
            if not text.strip():
                return True, []
            if any(chain in text for chain in CHAINS):
                self.held, self.state = None, "chained"
                return True, []
            if (spawned := SPAWNED.match(text)) is not None:  # the child's own traceback follows
                process = int(spawned[1])
                held, self.held, self.state = self.held, None, "idle"
                self.fallback = None if held is None else Told({**held.details, "process": process}, text=held.text)
                self.context = {"process": process}
                return True, []
            told = self.flush()
            claimed, more = self.feed(text)
            return claimed, told + more
        if TRACEBACK in text:
            self._begin(text)
            return True, []
        if self.state == "chained":
            if not text.strip():
                return True, []
            self.state = "idle"
            return False, []
        return self._frame(text)

    def flush(self, end: bool = False) -> list[Told]:
        """The exception held (the end of a stream, or a line that is no chain), or a spawn parent's re-raise
        whose child's traceback never ended; at the ``end`` of a stream, a traceback it ends within, whose
        exception it does not show (an excerpt cut there: the process was dying)."""
        held = self.held or self.fallback
        cut = held is None and end and self.state == "frames" and self.frames and not self.where.get("ignored")
        if cut and not LAUNCHER.search(str(self.last.get("file", ""))):  # (torchrun's own re-raise: no crash)
            held = Told({"error": "a traceback the log ends within", "cut": True, "frames": self.frames, **self.last})
        self.held, self.fallback, self.state = None, None, "idle"
        return [] if held is None else [held]

    def warned(self) -> None:
        """The next line is a logger's warning: a traceback it begins is a handled exception's, no crash."""
        if self.state == "idle":
            self.context = {"ignored": True}

    def _idle(self, text: str) -> tuple[bool, list[Told]]:
        if TRACEBACK in text:
            self._begin(text)
            return True, []
        if text[:1] in " \t" and 'File "' in text and FRAME.search(text) is not None:  # an excerpt begun mid-way
            self._begin("")
            return self._frame(text)
        if "Exception ignored in" in text:
            self.context = {"ignored": True}
            return True, []
        if (thread := THREAD.match(text)) is not None:
            self.context = {"thread": thread[1]}
            return True, []
        if "process" not in self.context or text.strip():
            self.context = {}
        return False, []

    def _begin(self, text: str) -> None:
        """A traceback begins at ``text``: what stands before its head on that line (a logger's prefix, a
        collector's tag) is cut from the lines that follow."""
        self.state, self.frames, self.last, self.stray, self.held = "frames", 0, {}, 0, None
        self.where, self.context = self.context, {}
        at = text.find(TRACEBACK)
        self.prefix = text[:at] if at > 0 and text[:at].strip() else ""

    def _frame(self, text: str) -> tuple[bool, list[Told]]:
        if not text.strip():
            return True, []
        if text[0] in " \t│╭╰|" or text.startswith('File "'):  # (a paste may lose the frames' indent)
            indent = len(text) - len(text.lstrip(" "))
            if (frame := FRAME.search(text)) is not None:
                self.frames, self.indent = self.frames + 1, indent
                self.last = {
                    "file": frame["file"] or frame["rfile"],
                    "line": int(frame["line"] or frame["rline"]),
                    "function": frame["func"] or frame["rfunc"] or "",
                }
                return True, []
            if not (self.frames and indent < self.indent and exception_details(text.lstrip(" "))):
                return True, []  # a frame's source, or its marker line
            text = text.lstrip(" ")  # an indented paste's exception: left of its frames
        details = exception_details(text)
        if details is None:
            self.stray += 1
            if self.stray > MAX_STRAY:
                self.state = "idle"
            return False, []
        self.state = "ended"
        crash = not any(news in text for news in NOT_A_CRASH) and not details["exception"].endswith("ChildFailedError")
        if crash and not self.where.get("ignored"):
            where = {k: v for k, v in self.where.items() if k in ("thread", "process")}
            self.held = Told({**details, "frames": self.frames, **self.last, **where}, text=text.strip())
            if "process" in where:
                self.fallback = None  # the child's traceback says it: the parent's re-raise only repeats it
        return True, []


#: A field of a torchrun failure entry: ``  rank      : 3 (local_rank: 3)``, ``  exitcode  : -6 (pid: 1234)``.
ENTRY_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
RANK = re.compile(r"(-?\d+)\s*\(local_rank:\s*(\d+)\)")
EXITCODE = re.compile(r"(-?\d+)\s*\(pid:\s*(\d+)\)(?:\s*(\w+))?")
SIGNAL = re.compile(r"Signal (\d+) \((\w+)\) received by PID")
JSON_MESSAGE = re.compile(r'^"message":\s*"(.*)",?$')
SECTIONS = ("Failures:", "Root Cause", "Other Failures:", "<NO_OTHER_FAILURES>")
#: The agent's own line when a worker dies: ``failed (exitcode: -6) local_rank: 6 (pid: 1246013) of binary: …``.
#: Since PyTorch 2.6: ``failed (exitcode: -9) for binary located at … with local_rank: 0 (process ID: 71)``.
AGENT_FAILED = re.compile(
    r"failed \(exitcode: (-?\d+)\) (?:local_rank: (\d+) \(pid: (\d+)\)|for binary located at \S+ with "
    r"local_rank: (\d+) \(process ID: (\d+)\))"
)


@dataclass
class _Entry:
    fields: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    exception: dict[str, Any] | None = None
    root: bool = False


class TorchrunReport:
    """torchrun's failure report, one stream's: each failed rank told once (by rank and pid)."""

    def __init__(self) -> None:
        self.active = False
        self.root = False
        self.entry: _Entry | None = None
        self.told: set[tuple[int | None, int | None]] = set()
        self.agent: dict[int, Told] = {}  # the agent's 'failed (exitcode…)' lines by pid, until the table says them

    def feed(self, text: str) -> tuple[bool, list[Told]]:
        """(whether ``text`` is the report's, the ranks its entries completed)."""
        if not self.active:
            if ("ChildFailedError:" in text and text[:1] not in " \t") or text.startswith(SECTIONS[:3]):
                self.active, self.root = True, text.startswith("Root Cause")
                return True, []
            if ENTRY.match(text) is not None:  # a table whose head was cut off
                self.active, self.entry = True, _Entry()
                return True, []
            if "failed (exitcode:" in text and (agent := AGENT_FAILED.search(text)) is not None:
                self._agent(agent, text)
                return True, []
            return False, []
        stripped = text.strip()
        if not stripped:  # a blank line a paste put between the table's lines: the entry goes on
            return True, []
        if (field_match := ENTRY_FIELD.match(text)) is not None and self.entry is not None:
            self.entry.fields.setdefault(field_match[1], field_match[2].strip())
            self.entry.lines.append(stripped)
            return True, []
        if self.entry is not None and text[:1] in " \t" and stripped:
            quoted = JSON_MESSAGE.search(stripped)  # the error file's JSON (PyTorch 1.9-1.10)
            details = exception_details(quoted[1] if quoted is not None else stripped)
            if details is not None:  # the root cause's own traceback, indented
                self.entry.exception = details
            return True, []
        told = self._close()
        if ENTRY.match(stripped) is not None:
            self.entry = _Entry(root=self.root)
        elif (
            stripped.startswith(SECTIONS) or not stripped or set(stripped) <= {"=", "-"} or stripped.endswith("FAILED")
        ):
            self.root = self.root or stripped.startswith("Root Cause")
        else:  # the table ended: the line may begin another (a second node's agent reports next)
            self.active, self.root = False, False
            claimed, more = self.feed(text)
            return claimed, told + more
        return True, told

    def flush(self) -> list[Told]:
        """An entry not yet closed, and the agent's lines no table followed."""
        told = self._close()
        told += [t for pid, t in sorted(self.agent.items()) if (None, pid) not in self.told]
        self.agent.clear()
        return told

    def _agent(self, match: re.Match[str], text: str) -> None:
        code, local, pid = int(match[1]), int(match[2] or match[4]), int(match[3] or match[5])
        details: dict[str, Any] = {"exit_code": code, "local_rank": local, "pid": pid}
        if code < 0:
            details["signal"] = signal_name(-code)
        self.agent[pid] = Told(details, text=text.strip())

    def _close(self) -> list[Told]:
        entry, self.entry = self.entry, None
        if entry is None or "rank" not in entry.fields:
            return []
        details: dict[str, Any] = {"root_cause": entry.root}
        rank = None
        if (found := RANK.match(entry.fields["rank"])) is not None:
            rank, details["local_rank"] = int(found[1]), int(found[2])
        pid = None
        if (found := EXITCODE.match(entry.fields.get("exitcode", ""))) is not None:
            details["exit_code"], pid = int(found[1]), int(found[2])
            details["pid"] = pid
            if details["exit_code"] < 0:
                details["signal"] = (
                    found[3] if found[3] and found[3].startswith("SIG") else signal_name(-details["exit_code"])
                )
        message = entry.fields.get("traceback", entry.fields.get("msg", ""))
        if (found := SIGNAL.search(message)) is not None:
            details["signal"] = found[2]
        if entry.fields.get("host"):
            details["host"] = entry.fields["host"]
        if entry.fields.get("error_file", "<N/A>") not in ("<N/A>", ""):
            details["error_file"] = entry.fields["error_file"]
        if entry.exception is not None:
            details.update(entry.exception)
        if (rank, pid) in self.told:
            return []
        self.told.add((rank, pid))
        if pid is not None:
            self.told.add((None, pid))
            self.agent.pop(pid, None)
        return [Told(details, rank=rank if rank is not None and rank >= 0 else None, text=" | ".join(entry.lines))]


def signal_name(number: int) -> str:
    """``6`` → ``SIGABRT`` (``SIG6`` for a number this platform does not name)."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def source_context(text: str) -> bool:
    """Whether ``text`` is a line of source an IPython traceback quotes (:data:`SOURCE_CONTEXT`)."""
    return SOURCE_CONTEXT.match(text) is not None
