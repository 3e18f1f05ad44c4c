"""A C++ exception in a Python job's output: c10::Error's ``what()`` and the glog error line it follows.

PyTorch's C++ core (and plugins such as torch_npu's) raise ``c10::Error``; its text ends with a trailer, ``Exception
raised from <function> at <file>:<line> (most recent call first):`` and a frame list, printed after the error's own
message — often a glog line (``[E326 08:57:33.451117940 compiler_depend.ts:418] setup failed!``) whose rank prefix
the following lines lack. :func:`raised_from` reads the trailer, :func:`error_line` tells a glog error line, and
:func:`message` the message of one. Pure.
"""

from __future__ import annotations

import re

#: A C++ exception's trailer (c10::Error's ``what()``): ``Exception raised from <function> at <file>:<line> (most
#: recent call first):``; the exception's message is the line before it.
RAISED = re.compile(r"Exception raised from (\S+) at \S+ \(most recent call first\)")
#: Functions whose trailer says what failed whatever the line before: the watchdog's timeout, and c10d's store reading
#: or writing its socket (``Exception raised from recvBytes at …/c10d/Utils.hpp:679``: the store's peer is gone).
RAISER_KINDS = {"checkTimeout": "timeout", "recvBytes": "transport", "sendBytes": "transport", "recvValue": "transport"}
#: A trailer this many lines after a failure told is that failure's (a CUDA error's, a watchdog's), not a new one.
ECHO_LINES = 6
#: A glog level and clock before a message: ``[E326 08:57:33.451117940 compiler_depend.ts:418] ``.
LEVEL = re.compile(r"^\s*\[?[IWEF]\d{3,4} [\d:.]+ (?:\d+ )?[\w./-]+:\d+\]\s*")
#: A glog error or fatal line: ``[E326 08:57:33.451117940 compiler_depend.ts:418] setup failed!``.
ERROR_LINE = re.compile(r"^\s*\[?[EF]\d{3,4} [\d:.]+ ")


def raised_from(text: str) -> str | None:
    """The function a C++ exception's trailer names, or None: no trailer."""
    if "Exception raised from" not in text:
        return None
    match = RAISED.search(text)
    return None if match is None else match[1]


def error_line(text: str) -> bool:
    """Whether ``text`` is a glog error or fatal line (the first character tested first: the common case)."""
    return (text[:1] in "EF" or text[:2] in ("[E", "[F")) and ERROR_LINE.match(text) is not None


def message(line: str) -> str:
    """An error line's message: its glog level and clock cut."""
    return LEVEL.sub("", line).strip()[:300]
