"""What a trainer says of its checkpoints: how long a save blocked training, that a load finished and how long it took.

A save becomes a report's ``checkpoint_ms`` (the time it blocked training); a finished load a ``checkpoint_loaded``
event (``duration_s`` where the line gives it, ``step`` where it names one), which the job's life books to the
restart it ended — once the job has run, a load is a resume, and the next step a new attempt's. Each
framework's own words, from its source (the wording by release: docs/logs.md):

- torchtitan: ``Finished saving the checkpoint in 0.60 seconds.`` (``Finished staging …`` for an async save;
  to v0.2.2 ``Finished saving the checkpoint (or staging if async is enabled)in 5.53 seconds.``), ``Finished
  loading the checkpoint in 54.49 seconds.``, and ``Loading the checkpoint at step 10.`` before it;
- NeMo 2.3+: ``Global Checkpoint Save : Rank: 0 : Iteration: 49 : Start time: 1771351145.879s : Save duration:
  5.330s`` (an async save's is the part that blocked training) and ``Global Checkpoint Load : Rank : 0 : Start
  time : 1744407969.270s : Time spent in load_checkpoint: 9.712s`` — rank 0's, once per save or load;
- Megatron-LM: the ``load-checkpoint`` timer (``    load-checkpoint ......: (4542.10, 4542.10)``, the slowest
  rank's milliseconds; before 2022 ``time (ms) | load-checkpoint: 0.16``), and ``successfully loaded checkpoint
  from DIR [ t 1/4, p 1/2 ] at iteration 5000``; its save timer is read with its iteration lines;
- Hugging Face ``Trainer``: ``Continuing training from global step 12386778`` (to 5.2) and ``Resuming training
  from checkpoint with epoch 2 and global step 1200`` (5.3+), at ``log_level=info``;
- Lightning: ``Restored all states from the checkpoint at PATH`` (``… checkpoint file at`` before 2.0);
- Composer: ``Trainer checkpoint loaded from PATH``.

DeepSpeed's per-file ``[Torch] Loaded checkpoint from`` lines (several per load) are left to the step going back.
Pure.
"""

from __future__ import annotations

import re
from typing import Any

_SECONDS = r"(\d+(?:\.\d+)?)"
#: A save that ended, with the seconds it blocked training.
SAVED = (
    re.compile(
        r"Finished (?:saving|staging) the checkpoint(?: \(or staging if async is enabled\))?\s*in "
        + _SECONDS
        + " seconds"
    ),
    re.compile(
        r"Global Checkpoint Save : Rank: 0 : (?:Iteration: \d+ : )?Start time: [\d.]+s : Save duration: "
        + _SECONDS
        + "s"
    ),
)
#: A load that ended, with its seconds.
LOADED_IN = (
    re.compile(r"Finished loading the checkpoint in " + _SECONDS + " seconds"),
    re.compile(
        r"Global Checkpoint Load : Rank : 0 : Start time : [\d.]+s : Time spent in load_checkpoint: " + _SECONDS + "s"
    ),
)
#: Megatron's load timer: the slowest rank's milliseconds (``minmax``, ``max`` and the pre-2022 one-line form).
LOAD_TIMER = re.compile(r"(?:^|\s|\| )load-checkpoint(?: \.*:|:) \(?(?:[\d.]+, )?" + _SECONDS + r"\)?")
#: A load that ended, without its time: the step it resumed from where the line names it.
LOADED = (
    re.compile(r"successfully loaded checkpoint from \S+(?: \[[^\]]*\])? at iteration (\d+)"),
    re.compile(r"Continuing training from global step (\d+)"),
    re.compile(r"Resuming training from checkpoint with epoch \d+ and global step (\d+)"),
    re.compile(r"Restored all states from the checkpoint (?:file )?at \S"),
    re.compile(r"Trainer checkpoint loaded from \S"),
)
#: ``Loading the checkpoint at step 10.``: the step the load that follows resumes from.
LOADING = re.compile(r"Loading the checkpoint at step (\d+)")
#: The words a line must hold for :func:`checkpoint_said` to look for a save, and for a load.
SAVE_MARKS = ("the checkpoint", "Global Checkpoint Save")
LOAD_MARKS = (
    "the checkpoint",
    "Global Checkpoint Load",
    "load-checkpoint",
    "successfully loaded checkpoint",
    "Continuing training from global step",
    "Resuming training from checkpoint",
    "Restored all states",
    "Trainer checkpoint loaded",
)


def checkpoint_said(text: str) -> tuple[str, dict[str, Any]] | None:
    """``("save", {"duration_s"})``, ``("load", {"duration_s"?, "step"?})`` or ``("loading", {"step"})`` for a
    line that says one (see the module), else None."""
    if any(mark in text for mark in SAVE_MARKS):
        for pattern in SAVED:
            if (match := pattern.search(text)) is not None:
                return "save", {"duration_s": float(match[1])}
    if not any(mark in text for mark in LOAD_MARKS):
        return None
    for pattern in LOADED_IN:
        if (match := pattern.search(text)) is not None:
            return "load", {"duration_s": float(match[1])}
    if "load-checkpoint" in text and (match := LOAD_TIMER.search(text)) is not None:
        return "load", {"duration_s": float(match[1]) / 1000.0}
    for pattern in LOADED:
        if (match := pattern.search(text)) is not None:
            return "load", {"step": int(match[1])} if match.groups() else {}
    if (match := LOADING.search(text)) is not None:
        return "loading", {"step": int(match[1])}
    return None
