"""Failures told in words: an error line no form of this package reads, classed by what its words say.

The scanner's last resort, for wordings nobody listed (another runtime's, another version's, a paste that kept
only a traceback's last line). An *error line* is an exception's line (``RuntimeError: …``,
``torch.distributed.DistBackendError: …``, after any logger prefix) or a logger's error (``ERROR``, ``FATAL``,
glog's ``E``/``F`` stamp, ``Error:``). Its words then say its class, in this order: a GPU allocation failing (out
of memory in any wording, not the host's), a collective timing out (a collective's or a backend's word beside a
timeout's), the transport failing (a connection reset, refused or closed, a broken pipe, a host unreachable, the
verbs' and InfiniBand's words); else, for an exception's line only, the process's own error. A logger's error
that says none of those is not a crash (a logger's ``ERROR`` is often a retry or a warning turned up). Pure: one
substring test before any regex.
"""

from __future__ import annotations

import re
from typing import Any

from .marks import any_of

#: An exception's line: a dotted class name that reads as an error, then its message (``SystemExit``, warnings and
#: ``StopIteration`` are no failure).
EXCEPTION = re.compile(
    r"(?:^|[\s:\]|>)-])(?P<name>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault))(?::\s?(?P<message>.*))?$"
)
#: conda's own exceptions, which a batch script's ``conda activate`` prints before (or instead of) the job: the
#: shell's, not a process of the job dying (``CommandNotFoundError: Your shell has not been properly configured to
#: use 'conda activate'.``, then the job runs in the base environment).
SHELL_ERRORS = frozenset(
    ("CommandNotFoundError", "EnvironmentLocationNotFound", "CondaEnvironmentError", "CondaError", "CondaValueError")
)
#: A logger's error level, or a message that begins by saying it is an error.
LOGGED_ERROR = re.compile(r"\bERROR\b|\bFATAL\b|\bCRITICAL\b|(?:^|\] ?)[EF]\d{4} \d\d:\d\d|(?:^|[\s:\]|])Error:")
#: A fatal signal named (Marian's ``[2019-02-26 00:12:43] Error: Segmentation fault``): the process's death.
DEATH = re.compile(
    r"\b(?:Segmentation fault|Bus error|Illegal instruction|Floating point exception|SIG(?:SEGV|BUS|ILL|FPE)\b)"
)
#: What an error line holds (the cheap test before any regex; a glog stamp begins with its level).
MARKS = ("rror", "ERROR", "xception", "Failure", "Fault", "FATAL", "CRITICAL")
_MARKED = any_of(MARKS)

#: A GPU allocation failing, in any wording; not the host's (the kernel's OOM killer, ``Cannot allocate memory``).
OOM = re.compile(
    r"[Oo]ut of (?:device |GPU |HBM )?memory|OutOfMemory|\bOOM\b|RESOURCE_EXHAUSTED|[Rr]esource exhausted"
    r"|[Mm]emory (?:is )?exhausted|[Ii]nsufficient (?:device |GPU |HBM )?memory|[Nn]ot enough (?:device |GPU )?memory"
    r"|[Ff]ailed to allocate|[Aa]llocation (?:of .{1,40} )?failed|显存不足|内存不足"
)
HOST_MEMORY = re.compile(
    r"[Oo][Oo][Mm][ _-]?[Kk]ill|[Cc]annot allocate memory|\bhost memory|\bCPU memory|\bRAM\b|low on memory"
)
#: A collective or its backend, and a timeout's word beside it.
COLLECTIVE = re.compile(
    r"NCCL|RCCL|HCCL|[Hh]ccl|oneCCL|gloo|Gloo|ProcessGroup|c10d|[Cc]ollective|[Cc]ommunicator|[Bb]arrier|MPI_|Horovod"
    r"|[Aa]ll_?[Rr]educe|ALLREDUCE|[Aa]ll_?[Gg]ather|ALLGATHER|[Rr]educe_?[Ss]catter|REDUCE_SCATTER|[Bb]roadcast"
    r"|BROADCAST|[Aa]ll_?[Tt]o_?[Aa]ll|ALLTOALL"
)
#: (``timeout`` as a word, not an argument's name: ``collective_rpc(method, timeout, args``)
TIMED_OUT = re.compile(
    r"[Tt]ime[sd]? out|[Tt]imed?out(?![\w=,)])|TIME_?OUT|TIMED_OUT|DEADLINE_EXCEEDED|[Dd]eadline ?[Ee]xceeded|超时"
)
#: A traceback's frame or source line a logger prefixed (``ERROR 09-24 20:59:57 [core.py:790]     return …``).
CODE = re.compile(r'^\s{2}|\]\s{3,}\S|File "')
#: The transport failing: a socket's errors, a peer gone, the verbs' and InfiniBand's words.
LINK_FAILED = re.compile(
    r"[Cc]onnection (?:reset|refused|closed|aborted|timed out|lost)|Broken pipe|[Nn]etwork is unreachable"
    r"|[Hh]ost is unreachable|No route to host|ECONNRESET|ECONNREFUSED|EPIPE|IBV_WC_\w+|ibv_\w+ failed"
    r"|[Tt]ransport retry|[Rr]emote (?:process|peer|end|host) (?:exited|closed|hung up|is gone|disconnected)"
    r"|[Pp]eer (?:closed|disconnected|is gone|hung up)|[Ll]ink (?:is )?down|NET/IB|NET/Socket|network error"
    r"|unhandled system error|ncclSystemError|ncclRemoteError|[Ss]ocket (?:is )?closed"
)
#: An exception's own detail (Ascend's ``EI9999`` lines, a C++ trailer, an mp.spawn child's error) follows its line
#: within a few lines: a class guessed from words waits this many lines for a form to read the failure, and is
#: dropped if one does (the form's reading is the better one).
GUESS_LINES = 8
#: A message longer than this is cut.
MAX_ERROR = 200


def error_said(text: str, level: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """What an error line says failed: ``("oom" | "timeout" | "link" | "crash", details)``, or None (no error line,
    or a logger's error that names no failure: a crash where it names a fatal signal). ``level``: a glog level its prefix gave (cut from ``text``)."""
    logged = level in ("E", "F")
    if not logged and text[:1] not in "EF" and _MARKED.search(text) is None:
        return None
    exception = EXCEPTION.search(text)
    if exception is None and ((not logged and LOGGED_ERROR.search(text) is None) or CODE.search(text) is not None):
        return None
    if exception is not None and exception["name"] in SHELL_ERRORS:
        return None  # the batch script's shell (conda's own commands), not the job: the script goes on
    words = text[exception.start("name") :] if exception is not None else text
    details: dict[str, Any] = {"error": words.strip()[:MAX_ERROR], "from_words": True}
    if exception is not None:
        details["exception"] = exception["name"]
    kind = failure_class(words)
    if kind is None and (exception is not None or DEATH.search(words) is not None):
        kind = "crash"
    return None if kind is None else (kind, details)


def failure_class(words: str, collective: bool = False) -> str | None:
    """What failed, in an error's ``words``: ``oom``, ``timeout`` (a collective's: ``collective`` where the error is
    one's already), ``link``, or None. Pure."""
    if OOM.search(words) is not None and HOST_MEMORY.search(words) is None:
        return "oom"
    if TIMED_OUT.search(words) is not None and (collective or COLLECTIVE.search(words) is not None):
        return "timeout"
    return "link" if LINK_FAILED.search(words) is not None else None
