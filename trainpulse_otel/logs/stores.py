"""c10d's store (TCPStore) and rendezvous losing or never reaching their peer, in PyTorch's words since 1.0.

A failed connect a warning tells is one try (the client tries again until its timeout); the error that it gave
up, a reset or refused connection, a timeout: a transport failure of the store. Pure: text in, details out.
"""

from __future__ import annotations

import re
from typing import Any

#: Words one of which a store's failure line holds (the scanner's cheap test).
MARKS = ("client socket has", "recvValue failed", "recvBytes failed", "sendBytes failed", "connect() timed out")
MARKS += ("C10d store has failed", "/THD/", "/c10d/")


#: c10d's store (TCPStore) losing or never reaching its peer: ``The client socket has failed to connect to
#: [node-1]:29500 (errno: 111 - Connection refused)``, ``recvValue failed … Connection reset by peer``, ``The client
#: socket has timed out after 60s while trying to connect to 192.0.0.1:1234``, 1.x's ``connect() timed out. Original
#: timeout was 60000 ms.``, the rendezvous's ``RendezvousConnectionError: The connection to the C10d store has failed``,
#: 1.0's process group (THD) and c10d naming their source: ``Connection reset by peer at …/THD/process_group/General.cpp:20``.
STORE_SOCKET = re.compile(
    r"client socket has failed to connect to (?P<peer>\S+) \(errno: \d+ - (?P<error>[^)]+)\)"
    r"|client socket has (?P<error3>timed out) after \d+\w* while trying to connect to (?P<peer3>\S+)"
    r"|\bconnect\(\) (?P<error4>timed out)\. Original timeout"
    r"|connection to the C10d store has (?P<error5>failed)"
    r"|(?:recvValue|recvBytes|sendBytes) failed.*?(?P<error2>Connection (?:reset by peer|closed by peer|refused)|Broken pipe)"
    r"|(?P<error6>Connection (?:reset by peer|closed by peer|refused)|Broken pipe) at \S*/(?:THD|c10d)/"
)


def failure(text: str) -> dict[str, Any] | None:
    """c10d's store connection failing: ``transport`` TCPStore, ``error``, ``peer`` where given."""
    match = STORE_SOCKET.search(text)
    if match is None:
        return None
    if match["error"] or match["error2"] or match["error6"]:
        error = (match["error"] or match["error2"] or match["error6"]).strip()
    else:
        error = "store connection failed" if match["error5"] else "connect timed out"
    details: dict[str, Any] = {"transport": "TCPStore", "error": error}
    if peer := match["peer"] or match["peer3"]:
        details["peer"] = peer
    return details


def retried(text: str, level: str | None) -> bool:
    """A c10d warning that one try to reach the store failed (``[W socket.cpp:663] [c10d] The client socket has
    failed to connect to [localhost]:12345 (errno: 101 - Network is unreachable).``): the client tries every address
    again until its timeout, and says ``… to any network address`` (an error) when it gives up."""
    warned = level == "W" or text.lstrip().startswith("[W")
    return warned and "client socket has failed to connect to " in text and "any network address" not in text
