"""What a launcher or scheduler says of the job beyond its processes' deaths: that it restarts them, or ends the job.

torchrun's elastic agent (PyTorch 1.9 on, and the launchers built on it: NVIDIA's ft_launcher, DLRover) says
``[default] Worker group FAILED. 3/3 attempts left; will restart worker group`` (``UNHEALTHY`` too; DLRover's
``Worker group FAILED, is failure node: False,2/3 attempts left; will restart worker group.``) when a worker
died and ``--max-restarts`` leaves it another try. Slurm's step daemon says it ended the job, or one of its
steps (``src/slurmd/slurmstepd/req.c``, every release to 25.11): ``slurmstepd: error: *** JOB 31182239 ON sh-06-34
CANCELLED AT 2018-11-05T10:35:06 DUE TO PREEMPTION ***`` (``TIME LIMIT``, ``NODE FAILURE, SEE SLURMCTLD LOG FOR
DETAILS``, ``JOB REQUEUE``; none for ``scancel``; 25.05's ``DUE to SIGNAL Terminated`` and ``DUE TO TASK
FAILURE``). Pure: one line in, its details out.
"""

from __future__ import annotations

import re
from typing import Any

#: The agent's restart line (see the module); ``role`` in the brackets before it where given.
RESTART = re.compile(
    r"(?:\[(?P<role>[\w.-]+)\] )?Worker group (?P<state>[A-Z]+)[.,]\s*(?:is failure node: \w+,\s*)?"
    r"(?P<remaining>\d+)/(?P<max>\d+) attempts left; will restart worker group"
)
#: The words a line must hold for :func:`workers_restarted` to look (the cheap test first).
MARK = "will restart worker group"
#: Slurm's line (see the module), and the words it must hold.
CANCELLED = re.compile(
    r"\*\*\* (?:JOB|STEP) (?P<job>[\w.+]+) ON (?P<node>\S+) CANCELLED AT (?P<at>\S+)(?: DUE (?:TO|to) (?P<why>.+?))? \*\*\*"
)
CANCELLED_MARK = " CANCELLED AT "
#: Slurm's reasons, and how each ends the attempt: killed (the job was sound) or failed.
REASONS = (
    ("PREEMPTION", "preemption", "kill"),
    ("TIME LIMIT", "time_limit", "kill"),
    ("JOB REQUEUE", "job_requeue", "kill"),
    ("NODE FAILURE", "node_failure", "failure"),
    ("TASK FAILURE", "task_failure", "failure"),
    ("SIGNAL", "signal", "kill"),
)


def workers_restarted(text: str) -> dict[str, Any] | None:
    """The agent's restart line's details (``state``, ``remaining``, ``max_restarts``, ``role``), or None."""
    if MARK not in text or (match := RESTART.search(text)) is None:
        return None
    details: dict[str, Any] = {
        "state": match["state"],
        "remaining": int(match["remaining"]),
        "max_restarts": int(match["max"]),
    }
    if match["role"]:
        details["role"] = match["role"]
    return details


def job_cancelled(text: str) -> dict[str, Any] | None:
    """Slurm's cancellation line's details (``job_id``, ``node``, ``reason``, ``end``), or None."""
    if CANCELLED_MARK not in text or (match := CANCELLED.search(text)) is None:
        return None
    why = (match["why"] or "").upper()
    reason, end = next(((name, end) for words, name, end in REASONS if why.startswith(words)), ("cancelled", "kill"))
    return {"job_id": match["job"], "node": match["node"], "reason": reason, "end": end}
