"""Lines around a failure that tell nothing new: the echoes NCCL and PyTorch print after a timeout, and the long
failure lines a terminal's wrap cuts in two, or a paste breaks after its colon (held by the scanner and read again
with their next line). Pure."""

from __future__ import annotations

#: The watchdog's word that a work failed: where no line before told a failure (an excerpt that starts there), the
#: watchdog's timeout; after one, its echo.
WATCHDOG_ECHOES = ("detected by watchdog at work", "failure detected by watchdog", "due to a collective timeout from")
WATCHDOG_ECHOES += ("Received a global timeout from another rank",)
#: Lines NCCL and PyTorch print around a timeout that repeat it: claimed, telling nothing new.
ECHOES = (
    *WATCHDOG_ECHOES,
    "Some NCCL operations have failed or timed out",
    "To avoid data inconsistency",
    "Received a dump signal",
    "preparing to dump debug info",
)
#: A terminal wraps a long line where its width ends, in mid-word: a line this long that begins a failure no form
#: reads whole is held and read again with its file's next line (its continuation carries no prefix of its own).
WRAPPED = ("Watchdog caught", "WorkNCCL(", "Got completion from peer", "out of memory", "CUDA error", "cudaMalloc", "NCCL WARN",
           "Execution of replica", "ProcessGroupNCCL's")  # fmt: skip
WRAPPED_MIN = 60


def cut_short(text: str) -> bool:
    """Whether a line no form read begins a failure another line may end: long enough for a terminal's wrap, or
    ending in the colon before its details (``Watchdog caught collective operation timeout:``, then
    ``WorkNCCL(…``)."""
    return (len(text) >= WRAPPED_MIN or text.rstrip().endswith(":")) and any(mark in text for mark in WRAPPED)
