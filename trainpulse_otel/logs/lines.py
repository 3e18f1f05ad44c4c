"""One line of a job's console output, with what is known of where it came from.

A :class:`LogLine` is what every way in hands the reader: a replayed file's
line (its number), a followed file's (its path, the time it was read), an
OTLP log record's (its node, file and time). What the text itself says of its
rank and time — a torchrun prefix (``[rank3]:``, ``[default3]:``), a leading
time stamp — is read by :func:`split_prefixes`; a file's name may say the rank
too (:func:`rank_of_source`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from .stamps import MONTHS, STAMP_FIRST, dated_stamp, month_day_clock, utc_time

#: ``[rank3]:`` (torchrun ``--tee`` with ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``), ``[default3]:`` (its older default); a
#: launcher's label before it is cut with it: pdsh's host (DeepSpeed's multi-node runner, ``worker-5: [rank22]:``),
#: a Ray actor's (``(WorkerDict pid=231421) [rank1]:``, ``(WorkerDict pid=1230, ip=10.0.0.7) [rank15]:``), ``grep -n``'s
#: line number (``1077:[default0]:``). A host label has a digit (``RuntimeError:`` is none).
#: Open MPI's ``--timestamp-output`` glued to its ``--tag-output``: ``Fri Aug 11 12:31:45 2023[1,0]<stdout>:``.
MPI_STAMP = re.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?=\[\d+,)")
#: Open MPI's ``--tag-output`` (mpirun, Horovod, SageMaker): ``[1,3]<stderr>:``, ``[1,mpirank:3,algo-1]<stdout>:``.
RANK_PREFIX = re.compile(
    r"^\s*(?:[\w.-]*\d[\w.-]*:\s*|\(\w+ pid=\d+[^)]*\)\s+)?\[(?:rank|default)(\d+)\]:\s?"
    r"|^\s*\[\d+,(?:mpirank:)?(\d+)(?:,[^\]]*)?\]<std(?:out|err)>:\s?"
)
#: A leading time stamp: ``[2024-05-01 10:00:00]``, ``[2024-05-01 10:00:00.123]``, ``2024-05-01 10:00:00,123``,
#: ``2024-05-01T10:00:00.123Z`` (collectors, Python logging, Megatron), torchtitan's ``[titan] 2025-06-16
#: 22:30:50,322``, a collector's stamp without seconds (``2025-02-18 12:54``); read as UTC when it names no zone.
#: A tag may stand before it: the Trainer examples' ``[INFO|trainer.py:1836] 2024-05-26 14:55:56,361``, a pod's
#: ``[dlc1mtq58q-master-0] [2026-03-30 19:24:35,966]``, a level word, a Ray actor's ``(TaskRunner pid=4242)``, a
#: ``^C`` the terminal echoed.
TIME_PREFIX = re.compile(
    r"^\s*(?:\^C)?(?:\(\w+ pid=\d+[^)]*\)\s+|\[[^\]\s]{1,80}\]\s*|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s+)?"
    r"(?:\[titan\] )?\[?(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}(?::\d{2})?)(?:[.,](?P<frac>\d{1,9}))?"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?\]?"
)
#: MLPerf's record (``:::MLLOG {"namespace": "", "time_ms": 1715111634920, …``): its time, the record kept whole.
MLLOG_TIME = re.compile(r':::MLLOG \{"namespace": "[^"]*", "time_ms": (\d{10,16})\b')
#: Slurm's word that it ended the job, the time inside (``*** JOB 31182239 ON sh-06-34 CANCELLED AT
#: 2018-11-05T10:35:06 DUE TO TIME LIMIT ***``): the line's own time, the line kept whole.
SLURM_AT = re.compile(r" CANCELLED AT (?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})")
#: Megatron's ``print_datetime``: ``[after training is done] datetime: 2025-12-03 14:45:03``.
MEGATRON_AT = re.compile(r"\] datetime: (?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})")
#: The CRI log format's stream and tag after its RFC 3339 time (``/var/log/pods/…/0.log`` on Kubernetes):
#: ``2024-05-01T10:00:00.123456789Z stdout F ``; ``P`` marks a line the runtime split (over 16 KiB).
CRI_TAG = re.compile(r"^ (?:stdout|stderr) [FP] ")
#: journald's and syslog's prefix (``journalctl``'s short and short-precise output, rsyslog's RFC 3164 files):
#: ``Dec  7 05:33:48 gpu-node-3 python[1234]: ``. Its clock has no year: read as glog's is (:func:`yearless_clock`).
SYSLOG_PREFIX = re.compile(
    r"^(?P<month>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(?P<day>\d{1,2}) (?P<clock>\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d{1,6}))? (?P<host>[\w.-]+) [\w./@:-]+(?:\[\d+\])?: "
)
#: glog's prefix, as torch.distributed.elastic's logger and c10 write it unbracketed: ``E0228 00:35:58.954000 724855
#: …/multiprocessing/api.py:732] ``. Cut, not read as a time: glog writes no year.
GLOG_PREFIX = re.compile(r"^[IWEF]\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6,9} +\d+ [\w./-]+:\d+\] ?")
#: A rank in a file's name: ``rank3.log``, ``rank_3.out``; Slurm's ``job-1234-3.out`` (``%j-%t``); torchrun's
#: ``--log-dir`` layout ``…/attempt_0/3/stdout.log`` (the local rank).
FILE_RANKS = (
    re.compile(r"rank[_-]?(\d+)[^/]*$", re.IGNORECASE),
    re.compile(r"-\d+-(\d+)\.\w+$"),
    re.compile(r"/(\d+)/std(?:out|err)\.log$"),
)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One console line (without its newline) and where it came from.

    ``source``: its file (evidence names it, and each file is its own stream); ``number``: its line number
    there; ``node``: the host that wrote it (None: this daemon's); ``rank``: the rank its source says;
    ``ts``: when it was read or received (None for a replayed file: the line's own time stamp, else the step
    times its reports give, decide); ``host``: the host a launcher's label on the line named (Open MPI's tag, a
    Ray actor's ``ip=``, pdsh's, ESPnet's; its failures' subject where no ``node`` says one: the line's file is its
    source's still).
    """

    text: str
    source: str | None = None
    number: int | None = None
    node: str | None = None
    rank: int | None = None
    ts: float | None = None
    host: str | None = None


#: A terminal's control sequences (colour, erase, cursor: CSI ``ESC [ … letter``), as a file holds them (the escape
#: byte) or as a paste shows them (``ESC[J``, ``^[[32m``); the words a line must hold for them to be looked for.
ESCAPES = re.compile(r"(?:\x1b|ESC|\^\[)\[[0-9;?]*[A-Za-z]")
ESCAPE_MARKS = ("\x1b", "ESC[", "^[[")
#: Ray's coloured actor label as a paste shows it when the escape bytes were lost: ``[36m(WorkerDict pid=42)[0m``.
BARE_RAY_COLOUR = re.compile(r"^\[\d{1,2}m(\([^)]{1,120}\))\[0m")


def without_escapes(line: LogLine) -> LogLine:
    """``line`` without a terminal's control sequences (:func:`plain`)."""
    text = plain(line.text)
    return line if text is line.text else replace(line, text=text)


def plain(text: str) -> str:
    """``text`` without a terminal's control sequences (:data:`ESCAPES`, :data:`BARE_RAY_COLOUR`): a coloured
    logger's or a progress bar's, which would hide a stamp at the line's start or split a key from its value."""
    if text[:1] == "[" and (bare := BARE_RAY_COLOUR.match(text)) is not None:
        text = bare[1] + text[bare.end() :]
    elif "\x1b" not in text and "ESC[" not in text and "^[[" not in text:  # ESCAPE_MARKS, without a loop per line
        return text
    return ESCAPES.sub("", text)


def split_prefixes(text: str) -> tuple[int | None, float | None, str]:
    """``(rank, unix time, rest)``: a torchrun rank prefix and a leading time stamp read off ``text``, in
    either order; each None when absent. A line's own stamp after a collector's (``kubectl logs --timestamps`` of a
    logger's line) is cut too; the collector's, on every line and in one zone, is its time."""
    rank = when = None
    if text[:1] in "JFMASOND" and (match := SYSLOG_PREFIX.match(text)):  # its yearless clock: :func:`yearless_clock`
        text = text[match.end() :]
    maybe_rank = "]:" in text or "]<std" in text  # what every rank prefix holds: most lines skip its pattern
    for _ in range(3):
        if rank is None and maybe_rank and (match := RANK_PREFIX.match(text)):
            rank, text = int(match[1] or match[2]), text[match.end() :]
        elif when is None and ":::MLLOG" in text and (match := MLLOG_TIME.search(text)):
            when = int(match[1]) / 1000.0
        elif when is None and ("D AT " in text or "] datetime: " in text) and (match := _said_at(text)) is not None:
            when = _unix_time(match)
        elif "-" in text[:40] and (match := TIME_PREFIX.match(text)):
            when, text = _unix_time(match) if when is None else when, text[match.end() :]
            if text[:1] == " ":  # the blank that parts a stamp from its line (and CRI's stream tag) is no indent
                text = text[tag.end() :] if (tag := CRI_TAG.match(text)) else text[1:]
        elif when is None and text[:1] in STAMP_FIRST and (dated := dated_stamp(text)) is not None:  # kept whole
            when = dated
            if not maybe_rank or (glued := MPI_STAMP.match(text)) is None:
                break
            text = text[glued.end() :]  # mpirun's --timestamp-output before its --tag-output: both cut
        else:
            break
    return rank, when, text


#: Python logging's default format (``basicConfig``'s ``%(levelname)s:%(name)s:%(message)s``): ``INFO:absl:[100]
#: accuracy=0.016, loss=0.69``, ``WARNING:tensorflow:…``, ``INFO:root:…``.
PY_LOGGING = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR|CRITICAL):[\w.-]+:")
#: Julia's logging macros' prefix: ``[ Info: Epoch 1``, a block's ``┌ Warning: …``.
JULIA_LOGGING = re.compile(r"[\[┌] (?:Info|Warning|Debug|Error): ")


def split_glog(text: str) -> tuple[str | None, str]:
    """``(level, rest)``: the glog level of a line whose rank and stamp prefixes are cut (:func:`split_prefixes`),
    its glog prefix cut too, but for a FATAL's (the line tells the process's end); ``(None, text)`` without one, or
    with Python logging's default prefix cut (:data:`PY_LOGGING`), or Julia's (:data:`JULIA_LOGGING`)."""
    if text[:1] in "IWDEC" and (logged := PY_LOGGING.match(text)) is not None:
        return None, text[logged.end() :]  # Python logging's default prefix: its level says nothing of a failure
    if text[:2] in ("[ ", "┌ ") and (logged := JULIA_LOGGING.match(text)) is not None:
        return None, text[logged.end() :]  # (Julia's)
    if not text or text[:1] not in "[IWEF" or (level := glog_level(text)) is None:
        return None, text
    if level != "F" and (match := GLOG_PREFIX.match(text)):
        text = text[match.end() :]
    return level, text


#: glog's clock as it begins a line (a ``[rankN]:`` prefix before it, a bracket around it): ``E0501 10:17:00.123456``,
#: c10's newer ``[E326 08:57:33.451117940`` (month not zero-padded, nanoseconds).
GLOG_CLOCK = re.compile(
    r"^\s*(?:\[(?:rank|default)\d+\]:)?\[?(?P<level>[IWEF])(?P<month>\d{1,2}?)(?P<day>\d{2}) (?P<clock>\d{2}:\d{2}:\d{2})\.(?P<frac>\d{6,9})\b"
)


def glog_level(text: str) -> str | None:
    """A line's glog level (``I``, ``W``, ``E``, ``F``), or None: no glog clock."""
    return None if (match := GLOG_CLOCK.match(text)) is None else match["level"]


def yearless_clock(text: str) -> str | None:
    """A line's syslog, glog or month-day clock (:func:`~.stamps.month_day_clock`) as ``MM-DDTHH:MM:SS.ffffff``
    (none writes a year), or None."""
    if text[:1] in "JFMASOND" and (match := SYSLOG_PREFIX.match(text)):
        month, frac = MONTHS.index(match["month"]) + 1, match["frac"] or "0"
    elif (match := GLOG_CLOCK.match(text)) is not None:
        month, frac = int(match["month"]), match["frac"]
    else:
        return month_day_clock(text)
    return f"{month:02d}-{int(match['day']):02d}T{match['clock']}.{frac[:6].ljust(6, '0')}"


def yearless_time(clock: str, year: int) -> float | None:
    """The unix time of a :func:`yearless_clock` in ``year`` (read as UTC), or None (no such day that year)."""
    try:
        return datetime.fromisoformat(f"{year:04d}-{clock}+00:00").timestamp()
    except ValueError:
        return None


def rank_of_source(source: str | None) -> int | None:
    """The rank a file's name says, or None."""
    if not source:
        return None
    for pattern in FILE_RANKS:
        if match := pattern.search(source):
            return int(match[1])
    return None


def _said_at(text: str) -> re.Match[str] | None:
    """A time a line states inside it (Slurm's ``CANCELLED AT``, Megatron's ``datetime:``), or None."""
    for mark, pattern in ((" CANCELLED AT ", SLURM_AT), ("] datetime: ", MEGATRON_AT)):
        if mark in text and (match := pattern.search(text)) is not None:
            return match
    return None


def _unix_time(match: re.Match[str]) -> float | None:
    said = match.groupdict()
    return utc_time(said["date"], said["time"], said.get("frac"), said.get("zone"))


#: The rank a line names of itself: torchrun's ``[rank2]:`` prefix glued after a progress bar (``… 10.54s/it][rank2]:
#: [E225 …``), the watchdog's ``[Rank 1] NCCL watchdog thread terminated with exception``, an assertion's ``Rank 3:
#: found NaN``, Habana's ``[Rank:0] FATAL ERROR``, Open MPI's ``--tag-output`` glued after a bar (``…2.38it/s][1,290]<stderr>:``),
#: ``torch.multiprocessing.spawn``'s ``process 3 terminated with signal SIGKILL`` (its process index: the rank it ran),
#: Ray Train's ``Worker 0 has failed.`` (its worker's rank).
#: The prefix is the global rank; a watchdog's ``[Rank 1]`` may be a rank in a smaller group.
NAMED_RANK = re.compile(
    r"\[rank(\d+)\]:|\[Rank[ :](\d+)\]|\bRank (\d+):|\[\d+,(\d+)\]<std(?:err|out)>:|\bprocess (\d+) terminated with (?:signal|exit)"
    r"|\bWorker (\d+) has failed\."
)


def named_rank(text: str) -> int | None:
    """The rank ``text`` names of itself (:data:`NAMED_RANK`), or None."""
    marked = "ank" in text or ">:" in text or "terminated with" in text or "has failed." in text
    match = NAMED_RANK.search(text) if marked else None
    return None if match is None else int(next(group for group in match.groups() if group))


#: NCCL's own prefix, the host (as NCCL's process named it), pid, thread and CUDA device of the line's process:
#: ``spark01:2683:2826 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed``, after pdsh's label where a
#: multi-node launcher added one (``compute-dy-p4d24xlarge-5: compute-dy-p4d24xlarge-5:3048:4991 [2] …``).
NCCL_ORIGIN = re.compile(r"^\s*(?:[\w.-]*\d[\w.-]*:\s+)?(?P<host>[A-Za-z][\w.-]*):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] ")
#: UCX's (and OpenMPI's) prefix: ``[node-3:2121 :0:7025] Caught signal 7 (Bus error …)``, ``[ksgpu-v-051:51920:0:52950]``.
UCX_ORIGIN = re.compile(r"^\s*\[(?P<host>(?=[\w.-]*[A-Za-z])[\w.-]+):\d+\s*:\d+:\d+\]")  # (a container's id too)
#: Open MPI's signal handler's (and old UCX's) ``[host:pid]``, ``[host:pid:0]``, known by the words after it (a logger's
#: ``[train.py:45]`` is no host): ``[nelson-lab0:04968] Signal: Segmentation fault (11)``, ``… *** Process received
#: signal ***``, a backtrace frame ``[ 3] /usr/lib/libmpi.so…``, ``[node-3:40360:0] Caught signal 11 (…)``.
SIGNAL_ORIGIN = re.compile(
    r"^\s*\[(?![\w.-]*\.(?:py|cc|cpp|c|h|hpp|rs|go|jl):)(?P<host>(?=[\w.-]*[A-Za-z])[\w.-]+):\d+(?::\d+)?\] "
    r"(?=\*\*\*|Signal(?: code)?:|Caught signal|Failing at|\[ ?\d+\])"
)


def nccl_host(text: str) -> str | None:
    """The host NCCL's (or UCX's) prefix names on ``text``, or None."""
    match = NCCL_ORIGIN.match(text) or UCX_ORIGIN.match(text) or SIGNAL_ORIGIN.match(text)
    return None if match is None else match["host"]


def nccl_device(text: str) -> tuple[str, int] | None:
    """``(host, CUDA device)`` NCCL's prefix names on ``text`` (the device its process drives), or None."""
    match = NCCL_ORIGIN.match(text)
    return None if match is None else (match["host"], int(match["dev"]))


def nccl_process(text: str) -> str | None:
    """The ``host:pid`` NCCL's prefix names on ``text`` (the process that printed it), or None."""
    match = NCCL_ORIGIN.match(text)
    return None if match is None else f"{match['host']}:{match['pid']}"


#: NCCL's INFO line that says a process's rank: ``spark01:2712:2824 [0] NCCL INFO comm 0x7fa9… rank 1 nranks 2 …``.
NCCL_RANK = re.compile(NCCL_ORIGIN.pattern + r"NCCL INFO .*?\brank (?P<rank>\d+) nranks (?P<nranks>\d+)")


def nccl_rank(text: str) -> tuple[str, int, int] | None:
    """``(host:pid, rank, nranks)`` where an NCCL INFO line says the rank of the process that printed it in one of
    its communicators (the job's own is the largest), else None."""
    match = NCCL_RANK.match(text) if " nranks " in text else None
    return None if match is None else (f"{match['host']}:{match['pid']}", int(match["rank"]), int(match["nranks"]))
