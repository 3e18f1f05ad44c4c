"""Launchers' labels: what a launcher writes in front of each line a trainer prints, cut before the line is read.

- Slurm's ``srun --label`` (``-l``): the task's number, padded to the widest (``0: ``, `` 3: ``, ``11: ``). A task
  is a rank where srun starts one per GPU, as Megatron, NeMo and MLPerf's scripts do; a ``[rankN]:`` prefix after
  it (torchrun inside srun) says the rank instead. Darknet's iteration line (``4259: 0.03, 0.04 avg loss, …``) and
  CatBoost's round (``87:     learn: 0.95``) are none.
- Ray's actor prefix (``(RayTrainWorker pid=4321, ip=10.0.0.5) ``, ``(pid=4321) ``, ``(raylet, ip=10.0.0.5) ``)
  and the ``[repeated 7x across cluster]`` its log deduplication appends.
- pdsh's host (DeepSpeed's and ColossalAI's multi-node runners): ``worker-5: ``, ``rdma-gpu-worker-1: ``, ``10.0.0.5: ``; a host name
  without a hyphen before its number (``node001``) is not told from a key (``step10:``), so it stays.
- Docker Compose's service (``trainer-1  | ``, ``trainer_1  | ``; not a wrapped number's exponent, ``E-01 | ``).
- ESPnet's distributed logger's host, rank and world size (``[node7:0/6] 2023-03-27 16:10:37,131 (trainer:663) …``):
  the rank as srun's task is, the host as pdsh's is.
- ``kubectl logs --prefix``'s pod and container (``[pod/trainer-worker-0/pytorch] ``): the pod, a host as pdsh's is.
- journald's and syslog's host (``Aug 26 15:28:16 gpu-node-3 kernel: …``): the line's host; the prefix is cut
  with its stamp (:func:`.lines.split_prefixes`).

A shell's prompt before the command a paste shows (``root@node4:~# dmesg -T | grep NVRM``) names the host the
output after it came from (:func:`prompt_host`): the reader keeps it for the file's failures.

A paste's Markdown quote (``> ``, nested ``> > ``: a log quoted in a reply) and R's reprex and knitr output mark
(``#> ``) are cut first, as a label is.

A label says where a line came from, never what it says: the line is read as the trainer printed it. Pure.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .lines import SYSLOG_PREFIX, LogLine

#: What follows an iteration's number that is no label: Darknet's ``4259: `` (its loss and average: ``0.034688,
#: 0.045240 avg``), CatBoost's round (``87:     learn: 0.954``, its tab turned to blanks in a paste), WaveGlow's
#: (``1234: -5.480178833``, a step and its loss printed to exactly nine places).
NOT_A_TASK = r"[-+]?(?:\d+\.\d+|nan|inf), [-+]?(?:\d+\.\d+|nan|inf) avg|\s*learn: |[-+]?\d+\.\d{9}\s*$"
#: srun's task number, Ray's actor, pdsh's host, ESPnet's host and rank: one label, anchored at the line's start.
LABEL = re.compile(
    r"^(?:\s{0,4}(?P<task>\d{1,5}): (?!" + NOT_A_TASK + ")"
    r"|\((?:[\w.:-]+(?:, | ))?(?:pid=\d+(?:, ip=(?P<ip>[\d.]+))?|ip=(?P<ip2>[\d.]+))\) "
    r"|\(raylet(?:, ip=(?P<ip3>[\d.]+))?\) "
    r"|(?P<pdsh>[A-Za-z][\w.]*(?:-[A-Za-z][\w.]*)*-\d[\w.-]*|\d{1,3}(?:\.\d{1,3}){3}): "
    r"|[A-Za-z][\w.-]+[-_]\d+ +\| "
    r"|\[(?P<espnet>[A-Za-z][\w.-]*):(?P<rank>\d+)/\d+\] "
    r"|\[pod/(?P<pod>[\w.-]+)/[\w.-]+\] )"
)
#: Ray's deduplication, at a line's end: ``… [repeated 7x across cluster]``.
REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]$")


def split_label(text: str) -> tuple[int | None, str]:
    """``(task, rest)``: a launcher's label cut off ``text`` (:data:`LABEL`) and Ray's repeat count off its end;
    ``task`` is the rank the label says (srun's task number, ESPnet's rank), None for any other label or none."""
    task, _, text = _split(text)
    return task, text


def _split(text: str) -> tuple[int | None, str | None, str]:
    """``(task, host, rest)``: :func:`split_label`'s, and the host the label names (a Ray actor's ``ip=``, pdsh's,
    ESPnet's)."""
    task = host = None
    while text[:1] == ">" and text[1:2] in (" ", ""):  # a Markdown quote's marker (``>>>`` is a prompt: kept)
        text = text[2:]
    if text[:2] == "#>" and text[2:3] in (" ", ""):  # R's reprex and knitr output mark
        text = text[3:]
    if (match := LABEL.match(text)) is not None:
        task = None if (said := match["task"] or match["rank"]) is None else int(said)
        host = match["ip"] or match["ip2"] or match["ip3"] or match["pdsh"] or match["espnet"] or match["pod"]
        text = text[match.end() :]
    if text.endswith("cluster]") and (repeated := REPEATED.search(text)) is not None:
        text = text[: repeated.start()]
    return task, host, text


#: Open MPI's ``--tag-output`` naming the host too (SageMaker's ``[1,mpirank:14,algo-2]<stdout>:``): the rank is
#: read with the line's other prefixes (:func:`.lines.split_prefixes`), the host here.
MPI_HOST = re.compile(r"^\s*\[\d+,(?:mpirank:)?\d+,([A-Za-z][\w.-]*)\]<std")


def without_label(line: LogLine) -> tuple[int | None, LogLine]:
    """``(task, line)``: ``line`` without its launcher's label (:func:`split_label`), and the rank it says; the
    host Open MPI's tag, a Ray actor's ``ip=`` or pdsh names is the line's ``host`` (its failures' subject; not its
    ``node``: a multi-node runner's merged output is one file on one clock)."""
    if line.text[:1] == "[" and (tagged := MPI_HOST.match(line.text)) is not None:
        return None, replace(line, host=tagged[1])
    if line.text[:1] in "JFMASOND" and (journal := SYSLOG_PREFIX.match(line.text)) is not None:
        return None, replace(line, host=journal["host"])  # the journal's host (its prefix is cut with the stamp)
    task, host, text = _split(line.text)
    if host is not None:  # the host a label names (Ray's, pdsh's, ESPnet's): its failures' subject
        return task, replace(line, text=text, host=host)
    return task, line if text is line.text else replace(line, text=text)


#: A shell's prompt: ``root@node4:~# ``, ``(base) user@gpu-3:~/work$ `` (a conda environment before it).
PROMPT = re.compile(r"^(?:\([\w.-]+\) )?[\w.-]+@(?P<host>[A-Za-z][\w.-]*):\S*[$#] ")
#: A host a poster hid or never had (``user@hostname``, ``localhost``): no host.
NO_HOST = frozenset(("hostname", "localhost", "host"))


def prompt_host(text: str) -> str | None:
    """The host a shell's prompt at the start of ``text`` names (:data:`PROMPT`), or None."""
    if "@" not in text[:64] or (match := PROMPT.match(text)) is None or match["host"].lower() in NO_HOST:
        return None
    return match["host"]
