"""A runtime's own socket calls failing, outside NCCL's and gloo's words: the transport under a job gone.

Open MPI's runtime failing to reach another node (``A process or daemon was unable to complete a TCP connection to
another process:``: a firewall, a wrong interface), gRPC's peer gone (TensorFlow's ``UnavailableError``, ``Socket
closed`` with ``"grpc_status":14``), and a C++ runtime's socket source file reporting a call that failed (DGL's
``…/network/tcp_socket.cc:180: recv error: Resource temporarily unavailable``, LightGBM's ``[Fatal] Socket recv
error, code: 54``). Each function reads
one line and returns a ``transport_error``'s details, or None. Pure.
"""

from __future__ import annotations

import re
from typing import Any

#: gRPC's transport gone (TensorFlow's parameter servers and workers, JAX's coordination service): ``UnavailableError``,
#: ``"grpc_status":14``, ``StatusCode.UNAVAILABLE``.
GRPC_UNAVAILABLE = re.compile(r"\bUnavailableError\b|\"grpc_status\":\s*14\b|StatusCode\.UNAVAILABLE")
#: A socket source file's own report of a call that failed: ``tcp_socket.cc:180: recv error: …``, ``Socket recv error``.
SOCKET_CALL = re.compile(
    r"\b\w*socket\w*\.(?:cc|cpp|cxx|c|h):\d+\]?:? (?P<call>recv|send|connect|accept)\w* (?:error|failed)"
    r"|\bSocket (?P<said>recv|send|connect|accept) error\b"  # (NCCL's ``Socket recv failed while polling`` is NCCL's)
)
#: What such lines hold (the scanner's cheap test).
SOCKET_MARKS = ("unable to complete a TCP connection", "recv error", "send error", "recv failed", "send failed")
SOCKET_MARKS += ("UnavailableError", "grpc_status", "UNAVAILABLE")


def socket_failure(text: str) -> dict[str, Any] | None:
    """Open MPI's TCP link or a socket call failing (see the module docstring): ``transport`` and ``error``."""
    if "unable to complete a TCP connection" in text:
        return {"transport": "tcp", "error": text.strip()[:200]}
    if (match := GRPC_UNAVAILABLE.search(text)) is not None:
        return {"transport": "grpc", "error": text[match.start() :].strip()[:200]}
    if (match := SOCKET_CALL.search(text)) is not None:
        return {
            "transport": "socket",
            "error": text[match.start() :].strip()[:200],
            "call": match["call"] or match["said"],
        }
    return None
