"""What a trainer says of its checkpoints: how long a save blocked training, how long a load took.

torchtitan (``torchtitan/components/checkpoint.py``): ``Finished saving the checkpoint in 0.60 seconds.`` (and,
since async saves, ``Finished saving the checkpoint (or staging if async is enabled)in 5.53 seconds.``), and
``Loading the checkpoint at step 10.`` then ``Finished loading the checkpoint in 54.49 seconds.``. A save becomes a
report's ``checkpoint_ms`` (the time it blocked training); a load a ``checkpoint_loaded`` event (``duration_s``,
and the ``step`` the line before named), which the job's life books to the restart it ended. Pure.
"""

from __future__ import annotations

import re
from typing import Any

#: ``Finished saving the checkpoint [(or staging if async is enabled)]in 0.60 seconds``.
SAVED = re.compile(
    r"Finished saving the checkpoint(?: \(or staging if async is enabled\))?\s*in (\d+(?:\.\d+)?) seconds"
)
#: ``Finished loading the checkpoint in 54.49 seconds``.
LOADED = re.compile(r"Finished loading the checkpoint in (\d+(?:\.\d+)?) seconds")
#: ``Loading the checkpoint at step 10.``: the step the load that follows resumes from.
LOADING = re.compile(r"Loading the checkpoint at step (\d+)")
#: The words a line must hold for :func:`checkpoint_said` to look.
MARK = "the checkpoint"


def checkpoint_said(text: str) -> tuple[str, dict[str, Any]] | None:
    """``("save", {"duration_s"})``, ``("load", {"duration_s"})`` or ``("loading", {"step"})`` for a line that
    says one (see the module), else None."""
    if MARK not in text:
        return None
    if (match := SAVED.search(text)) is not None:
        return "save", {"duration_s": float(match[1])}
    if (match := LOADED.search(text)) is not None:
        return "load", {"duration_s": float(match[1])}
    if (match := LOADING.search(text)) is not None:
        return "loading", {"step": int(match[1])}
    return None
