"""What a line says of a collective that timed out or a transport that failed: NCCL, gloo, PyTorch's watchdogs.

Each function reads one line (its prefixes already cut) and returns the
details it gives, or None when the line is not of its form. Callers check a
cheap substring first (:mod:`.failures`); the forms and where each comes from
are in docs/logs.md.
"""

from __future__ import annotations

import re
from typing import Any

#: ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=…, …) ran for N milliseconds`` —
#: the text of ProcessGroupNCCL's checkTimeout in every PyTorch since 1.8 (fields come and go).
WORK = re.compile(
    r"Work(?P<backend>[NH])CCL\((?P<body>(?:[^()]|\(ms\))*)(?:\)(?: ran for (?P<ran>\d+) millisecond)?|$)"
)
#: One ``Key=value`` of a WorkNCCL: ``SeqNum=88``, ``Timeout(ms)=600000``, ``TensorShape=[1, 2]``.
FIELD = re.compile(r"(\w+(?:\(ms\))?)=(\[[^\]]*\]|[^,)\s]+)")
WORK_FIELDS = {"SeqNum": "seq", "Timeout(ms)": "timeout_ms", "NumelIn": "numel_in", "NumelOut": "numel_out"}
#: The ``[Rank 3]`` of the watchdog's own message: the rank in the process group — of the first group whose work
#: logged in the process, since PyTorch 2.2 keeps WorkNCCL's prefix in a function-local static; the ``[PG … Rank r]``
#: prefix, where a line has one, is the group's own.
WORK_RANK = re.compile(r"\[Rank (\d+)\]\s*(?:Watchdog caught|Caught collective|Work WorkNCCL)")
#: A process group's log prefix, in each PyTorch's form: ``[PG 1 Rank 0]`` (2.3), ``[PG 0 (default_pg) Rank 7]``
#: (2.4), ``[PG ID 0 PG GUID 0(default_pg) Rank 1]``, ``[PG ID 2 PG GUID 9 Rank 4]`` (2.5 on).
PG_PREFIX = re.compile(
    r"\[PG (?:ID (?P<id>\d+) PG GUID (?P<guid>[\w.:-]+)|(?P<uid>[\w.:-]+))\s*(?:\((?P<name>[^)]*)\))?\s*Rank (?P<rank>\d+)\]"
)
#: The heartbeat monitor's exit message (``…'s watchdog got stuck for 480 seconds without making progress``) and
#: its first line (``Heartbeat monitor timed out! … workMetaList_.size()=1``).
HEARTBEAT_STUCK = re.compile(r"watchdog got stuck for (\d+) seconds")
HEARTBEAT_WORKS = re.compile(r"workMetaList_\.size\(\)\s*=\s*(\d+)")
#: gloo's ``[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv
#: operation to complete``.
GLOO_TIMEOUT = re.compile(r"Timed out waiting (\d+)ms for (\w+) operation\b")
#: NCCL's InfiniBand completion error, in each NCCL's form: ``with error 12, opcode 0, len 0, vendor err 129``
#: (≤ 2.18), ``with status=12 opcode=0 len=0 vendor err 129 (Recv)`` (2.19 on),
#: ``with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 … hca mlx5_0`` (2.27 on).
IB_COMPLETION = re.compile(
    r"NET/IB\w*(?:/\w+)?\s*:\s*Got completion from peer (?P<peer>\S+?),? with (?:error|status)[= ]"
    r"(?:(?P<status>\w+)\()?(?P<error>\d+)\)?"
)
IB_OPCODE = re.compile(r"opcode[= ](?:\w+\()?(\d+)")
IB_LEN = re.compile(r"\blen[= ](\d+)")
IB_VENDOR = re.compile(r"vendor[ _]err[= ](\d+)")
IB_DIRECTION = re.compile(r"\((Send|Recv)\)")
IB_HCA = re.compile(r"\bhca (\S+)")
#: ``NET/IB : Got async event : port error`` and ``NET/IB : mlx5_3:1 Got non-fatal async event: port error(10)``.
IB_ASYNC = re.compile(
    r"NET/IB\w*\s*:\s*(?:(?P<dev>\S+) )?Got (?P<nonfatal>non-fatal )?async event\s*:\s*(?P<event>[^(]+)"
)
#: A verbs completion status in words (``ibv_wc_status_str``'s, and UCX's ib_mlx5 log): ``Transport retry count
#: exceeded on mlx5_0:1/RoCE``, ``transport retry counter exceeded``, ``RNR retry counter exceeded``.
VERBS_WORDS = re.compile(r"\b(?P<what>[Tt]ransport|RNR) retry count(?:er)? exceeded(?: on (?P<dev>[\w:/.-]+))?")
#: The marks of :data:`VERBS_WORDS` (substrings the reader tests first).
VERBS_MARKS = ("retry count exceeded", "retry counter exceeded")
IB_EVENT_MARKS = ("async event", "IBV_WC_")
SOCKET_WARN_MARKS = ("Connection closed by remote peer", " failed : ")
#: An ``ibv_wc_status`` name anywhere in a WARN line: ``IBV_WC_RETRY_EXC_ERR``.
IBV_STATUS = re.compile(r"\b(IBV_WC_\w+_ERR)\b")
#: NCCL's socket errors: ``Net : Connection closed by remote peer host<47861>``, ``socketProgress: Connection
#: closed by remote peer node2<42830>``, ``socketProgressOpt: Call to recv from 172.…<33759> failed : Connection
#: reset by peer``, ``Net : Call to recv from 10.…<58355> failed : Broken pipe``, ``socketStartConnect: Connect to
#: 10.0.0.2<45763> failed : Software caused connection abort``.
NCCL_SOCKET = re.compile(
    r"(?P<where>Net|NET/Socket|socket\w*)\s*:\s*(?:Connection closed by remote peer (?P<closed>\S+)"
    r"|Call to (?P<op>\w+) (?:from|to) (?P<peer>\S+) failed\s*:\s*(?P<reason>.+?)\s*$"
    r"|Connect to (?P<target>\S+) failed\s*:\s*(?P<creason>.+?)\s*$)"
)
#: gloo's TCP pair: ``[…/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895`` and
#: ``[…/pair.cc:589] Read error [192.168.70.92]:25266: Connection reset by peer``.
GLOO_PAIR = re.compile(
    r"gloo/transport/tcp/pair\.cc:\d+\]\s*(?:(?P<closed>Connection closed by peer) \[(?P<host>[^\]]+)\]:(?P<port>\d+)"
    r"|(?P<op>Read|Write) error \[(?P<host2>[^\]]+)\]:(?P<port2>\d+): (?P<reason>.+?)\s*$)"
)


#: An NCCL warning in any release's form: ``NCCL WARN …`` (2.3 on), 2018's ``include/socket.h:194 WARN …`` (a
#: source location, then ``WARN``), a plugin's ``create_nccl_ofi_component:459 NCCL WARN NET/OFI …``.
NCCL_WARNING = re.compile(
    r"(?:\bNCCL WARN|\w\.(?:h|cc|cu|cpp)[: ]\d+ WARN|\w:\d+ NCCL WARN|^WARN: Function: \w+ Line: \d+:)\s*(?P<message>.*\S)"
)
#: What in a warning says the network itself failed (a missing optional library, ``Failed to open
#: libibverbs.so``, is no failure: NCCL falls back to sockets); aws-ofi-nccl's ``NET/OFI Request 0x… completed with
#: error.`` (on the WARN's next line), NCCL's topology failing across nodes (``ring 2 does not loop back to start``),
#: no network transport at all (``Failed to initialize any NET plugin``: NCCL could start none of its NET plugins).
NET_FAILURE = re.compile(
    r"Connection (?:reset|refused|closed|timed out|abort)|connection abort|Network is unreachable|No route to host"
    r"|Broken pipe|Call to \w+ failed|Connect to \S+ failed|ibv_\w+ failed|Couldn't open AV|UNDELIVERABLE|exceeded (?:error "
    r"retry count|retries|timeouts)|Accept failed|Error encountered progressing|encountered a fatal error|Aborting due to call"
    r"|Invalid address|async (?:fatal )?event|IBV_WC_\w+|NET/\w+\s*:.*(?:error|failed|timeout)|remote process exited"
    r"|Call to rank \d+ failed|Failed to execute operation \w+ from rank|completed with error|Unable to retrieve completion"
    r"|does not loop back to start|Failed to initialize any NET plugin",
    re.IGNORECASE,
)
#: An offload failing to set up, which NCCL falls back from to point-to-point (SHARP's ``Cannot create SHArP job(-11)``,
#: ``Cannot initialize CollNet, using point-to-point network instead``), or an IB device its startup probe skips (``Call
#: to ibv_open_device failed``, ``NET/IB : Unable to open device mlx5_an0``): no failure.
FALLBACK = re.compile(
    r"SHARP coll init|Cannot create SHArP|CollNet|ibv_open_device failed|Unable to open device", re.IGNORECASE
)
#: The transport a warning's words name (the first that matches), else NCCL's sockets.
WARNED_TRANSPORTS = (("topology", ("loop back",)), ("IB", ("ibv", "/ib", "async event")),
                     ("OFI", ("ofi", "efa", "libfabric", " av")))  # fmt: skip
#: NCCL's errors of the network: a peer or the link (``ncclRemoteError``), a socket or verbs call (the others).
NCCL_NET_ERRORS = ("ncclRemoteError", "ncclSystemError", "unhandled system error")
#: The peer a warning names by rank: ``Proxy Call to rank 14 failed (Connect)``.
PEER_RANK = re.compile(r"\b(?:to|from|with) rank (\d+)\b")
#: NCCL's INFO line of a connection it retries: ``Call to connect returned Connection refused, retrying``.
CONNECT_RETRY = re.compile(r"Call to connect returned (?P<reason>[^,]+), retrying")


#: Horovod's stall inspector: ``One or more tensors were submitted … waiting for remainder of ranks for more than
#: 60 seconds``, then ``Stalled ops:`` with ``HorovodAllreduce_… [missing ranks: 0, 3]``.
#: DeepEP's kernels giving up on their peers (MoE all-to-all over NVLink and RDMA): ``DeepEP timeout check failed: rank =
#: 7, thread = 0)``, ``DeepEP dispatch NVL receiver timeout, channel: 9, …``, ``DeepEP RDMA sender coordinator timeout``.
DEEPEP_TIMEOUT = re.compile(r"DeepEP (?:timeout check failed|[\w ()]{0,60}? timeout\b)")
HOROVOD_STALL = re.compile(r"waiting for remainder of ranks for more than (\d+) seconds")
MISSING_RANKS = re.compile(r"\[missing ranks: ([\d, ]+)\]")
#: PyTorch's flight-recorder analyzer (``torchfrtrace``) naming who did not join: ``Not all ranks joining collective 5
#: at entry 4`` then ``missing ranks: {1}`` on a line of its own (before 2.5, ``Missing ranks are {1}``).
FR_MISSING = re.compile(r"^\s*missing ranks: \{([\d, ]+)\}|\bMissing ranks are \{([\d, ]+)\}")
#: Huawei HCCL on Ascend NPUs: ``EI0006: … Getting socket times out. Reason: Remote Rank did not send the data in
#: time``, ``EI0002: … The wait execution of the Notify register times out``, and the device's own ``hccl fftsplus
#: task timeout occurred during task execution, … timeout:30min(default)`` (under ``EI9999``), the runtime's
#: ``event wait timeout occurred during task execution, … timeout=1980`` (a stream waiting on its peers past
#: ``HCCL_EXEC_TIMEOUT``).
HCCL_TIMEOUT = re.compile(
    r"\bEI000[26]\b.*?\btimes? out|\bhccl (?:\w+ )?task timeout occurred"
    r"|\b(?:event|notify) wait timeout occurred during task"
)
#: HCCL's transport between NPUs failed to come up: ``EI0009: … Transport init error. Reason: [Create][DestLink]…``.
HCCL_TRANSPORT = re.compile(r"\b(?P<code>EI\d{4}):.*?\b(?P<error>Transport init error)")
#: The watchdog's summary when no timeout line came: ``Timeout at NCCL work: 15734, last enqueued NCCL work: …``;
#: 2.4's desync report: ``- [2] Timeout at collective: ALLREDUCE, #730``.
TIMEOUT_AT = re.compile(r"Timeout at (?:NCCL work: |collective: \w+, #)(\d+)")
#: c10d's barrier that names who did not come: ``Rank 1 failed to pass monitoredBarrier in 1800000 ms``, ``Ranks 1, 3
#: failed to pass monitoredBarrier in 30000 ms``.
MONITORED_BARRIER = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier in (\d+) ms")
#: c10d's store waited past its timeout for a peer: ``Timed out after 901 seconds waiting for clients``, ``Socket
#: Timeout``, ``Wait timeout for key``, ``… in store based barrier`` (elastic's ``… error of type …``: a warning).
STORE_TIMEOUT = re.compile(
    r"Timed out after (\d+) seconds waiting for clients|got error: Socket Timeout|Socket Timeout|Wait timeout for key"
    r"|(?<!error of type )RendezvousTimeoutError|in store based barrier"
)
#: The watchdog's word that a work failed: ``failure detected by watchdog at work sequence id: 730 PG status: …``.
WORK_SEQ = re.compile(r"at work sequence id: (\d+)")
#: PyTorch's desync report after a timeout: ``[1] finished collective #2, but didn't join collective #3``.
DESYNC = re.compile(r"\[(\d+)\] (?:finished collective #\d+, but didn't join|joined but didn't finish) collective")


#: Words of a collective another watchdog saw stall (Horovod, HCCL, c10d's barrier and store, NCCL's summary).
STALLED_MARKS = (
    "remainder of ranks",
    "missing ranks",
    "Missing ranks are",
    "EI000",
    "task timeout occurred",
    "timeout occurred during task",
    "Timeout at NCCL work",
    "Timeout at collective",
    "DeepEP",
    "didn't join",
    "didn't finish",
    "monitoredBarrier",
    "Timed out after",
    "Socket Timeout",
    "Wait timeout",
    "RendezvousTimeout",
    "store based barrier",
)
#: Words of c10d's store losing its peer.


def warn_line(text: str) -> bool:
    """An NCCL WARN line, or the detail NCCL's error message quotes after ``Last error:``."""
    return "NCCL WARN" in text or text.lstrip().startswith(("Net ", "NET/", "socket", "WARN: Function:"))


def stalled_collective(text: str) -> dict[str, Any] | None:
    """A collective another library's watchdog saw stall (Horovod's stall inspector and its missing ranks, HCCL's
    timeouts), NCCL's summary line alone, or a rank PyTorch's desync report names behind: the details of a
    timeout (``behind_ranks`` / ``missing_ranks`` where the line names them)."""
    if (match := HOROVOD_STALL.search(text)) is not None:
        return {"backend": "horovod", "timeout_ms": int(match[1]) * 1000}
    if (match := MISSING_RANKS.search(text)) is not None:
        return {"backend": "horovod", "missing_ranks": sorted({int(r) for r in match[1].split(",") if r.strip()})}
    if (match := FR_MISSING.search(text)) is not None:
        ranks = (match[1] or match[2]).split(",")
        return {"backend": "flight recorder", "missing_ranks": sorted({int(r) for r in ranks if r.strip()})}
    if DEEPEP_TIMEOUT.search(text) is not None:
        return {"backend": "deepep", "error": text.strip()[:200]}
    if HCCL_TIMEOUT.search(text) is not None:
        return {"backend": "hccl", "error": text.strip()[:200]}
    if (match := TIMEOUT_AT.search(text)) is not None:
        return {"backend": "nccl", "seq": int(match[1]), **pg_details(text)}
    if (match := DESYNC.search(text)) is not None:
        return {"backend": "nccl", "desync": True, "behind_ranks": [int(match[1])]}
    if (match := MONITORED_BARRIER.search(text)) is not None:
        missing = sorted({int(r) for r in match[1].split(",") if r.strip()})
        return {"backend": "c10d", "op": "monitoredBarrier", "timeout_ms": int(match[2]), "missing_ranks": missing}
    if (match := STORE_TIMEOUT.search(text)) is not None:
        details: dict[str, Any] = {"backend": "c10d store", "op": "store wait"}
        if match[1] is not None:
            details["timeout_ms"] = int(match[1]) * 1000
        return details
    return None


def transport_warning(text: str) -> dict[str, Any] | None:
    """An NCCL warning that the network failed, in words no finer form reads: ``transport`` (IB, OFI or Socket
    by what it names) and ``error`` (the warning's words)."""
    match = NCCL_WARNING.search(text)
    if match is None or NET_FAILURE.search(match["message"]) is None or FALLBACK.search(match["message"]):
        return None
    message = match["message"]
    lowered = message.lower()
    transport = next((name for name, words in WARNED_TRANSPORTS if any(w in lowered for w in words)), "Socket")
    details: dict[str, Any] = {"transport": transport, "error": message[:200]}
    if (peer := PEER_RANK.search(message)) is not None:
        details["peer_rank"] = int(peer[1])
    return details


#: NCCL's INFO trace of an error code returned up its stack (``NCCL INFO transport/net.cc:515 -> 2``): a system
#: error (2) in its network's files (a socket, verbs, the proxy, the bootstrap). A remote error's (6) is the peer's,
#: which that peer's own lines tell.
NCCL_TRACE = re.compile(r"NCCL INFO (?P<file>[\w/.]+\.(?:cc|h)):\d+ -> 2\s*$")
NETWORK_FILES = ("net", "socket", "ibv", "proxy", "bootstrap")


def nccl_trace(text: str) -> dict[str, Any] | None:
    """A transport error NCCL's return-code trace says where no warning line did (:data:`NCCL_TRACE`), or None."""
    match = NCCL_TRACE.search(text)
    if match is None or not any(word in match["file"] for word in NETWORK_FILES):
        return None
    return {"transport": "NCCL", "error": "ncclSystemError"}


def connect_retry(text: str) -> str | None:
    """The reason of NCCL's ``Call to connect returned …, retrying`` INFO line, or None."""
    match = CONNECT_RETRY.search(text)
    return None if match is None else match["reason"].strip()


def number(text: str) -> int | str:
    return int(text) if text.lstrip("-").isdigit() else text  # a field's value, as an int when it is one


def pg_details(text: str) -> dict[str, Any]:
    """The process group a line's ``[PG …]`` prefix names: ``pg_id``, ``pg_name`` (its description) and, when no
    watchdog ``[Rank N]`` says it, ``pg_rank``."""
    match = PG_PREFIX.search(text)
    if match is None:
        return {}
    details: dict[str, Any] = {"pg_id": number(match["id"] if match["id"] is not None else match["uid"])}
    if match["guid"] is not None:
        details["pg_guid"] = number(match["guid"])
    if match["name"]:
        details["pg_name"] = match["name"]
    details["pg_rank"] = int(match["rank"])
    return details


def watchdog(text: str) -> dict[str, Any] | None:
    """NCCL's watchdog timeout (and its ``Work WorkNCCL(…) timed out in blocking wait`` form): the op, ``seq``,
    ``timeout_ms``, ``ran_ms``, ``numel_in``/``numel_out``, the rank in its process group, the group."""
    match = WORK.search(text)
    if match is None:
        return None
    fields = dict(FIELD.findall(match["body"]))
    details: dict[str, Any] = {"backend": f"{match['backend'].lower()}ccl", **pg_details(text[: match.start()])}
    if "OpType" in fields:
        details["op"] = fields["OpType"]
    for key, name in WORK_FIELDS.items():
        if key in fields and fields[key].isdigit():
            details[name] = int(fields[key])
    if match["ran"] is not None:
        details["ran_ms"] = int(match["ran"])
    if "blocking wait" in text[match.end() :]:
        details["blocking_wait"] = True
    if "pg_rank" not in details and (rank := WORK_RANK.search(text)) is not None:
        details["pg_rank"] = int(rank[1])  # the group prefix's, when there is one: WorkNCCL's may be stale
    return details


def heartbeat(text: str) -> dict[str, Any] | None:
    """ProcessGroupNCCL's heartbeat monitor gave up on a watchdog that made no progress: how long it waited
    (``timeout_ms``), how many works were queued, the process group."""
    stuck = HEARTBEAT_STUCK.search(text)
    if stuck is None and "Heartbeat monitor timed out" not in text:
        return None
    details: dict[str, Any] = {"backend": "nccl", "monitor": "heartbeat", **pg_details(text)}
    if stuck is not None:
        details["timeout_ms"] = int(stuck[1]) * 1000
    if (works := HEARTBEAT_WORKS.search(text)) is not None:
        details["pending_works"] = int(works[1])
    return details


def fatal_exit(text: str) -> dict[str, Any] | None:
    """ProcessGroupNCCL's ``[F…] … Terminating the process after attempting to dump debug info, due to …``: the
    fatal line after a timeout (its cause: a collective's ``timeout`` or the watchdog's ``hang``)."""
    if "Terminating the process after attempting to dump debug info" not in text:
        return None
    cause = "heartbeat" if "watchdog hang" in text else "timeout"
    return {"backend": "nccl", "fatal": True, "cause": cause, **pg_details(text)}


def gloo_timeout(text: str) -> dict[str, Any] | None:
    """gloo's ``Timed out waiting 1800000ms for recv operation to complete`` (and ``Application timeout caused
    pair closure``): the op and the timeout."""
    match = GLOO_TIMEOUT.search(text)
    if match is not None:
        return {"backend": "gloo", "op": match[2], "timeout_ms": int(match[1])}
    if "Application timeout caused pair closure" in text:
        return {"backend": "gloo"}
    return None


def ib_error(text: str) -> dict[str, Any] | None:
    """An InfiniBand completion error: ``transport`` IB, ``error`` (the ibv_wc_status code; 12 is
    ``IBV_WC_RETRY_EXC_ERR``), ``vendor_err``, the ``peer``, the opcode, length, direction and HCA."""
    match = IB_COMPLETION.search(text)
    if match is None:
        return None
    details: dict[str, Any] = {"transport": "IB", "error": int(match["error"]), "peer": match["peer"]}
    if match["status"]:
        details["status"] = match["status"]
    rest = text[match.end() :]
    for pattern, name in ((IB_OPCODE, "opcode"), (IB_LEN, "len"), (IB_VENDOR, "vendor_err")):
        if (found := pattern.search(rest)) is not None:
            details[name] = int(found[1])
    if (found := IB_DIRECTION.search(rest)) is not None:
        details["direction"] = found[1]
    if (found := IB_HCA.search(rest)) is not None:
        details["hca"] = found[1]
    return details


def ib_event(text: str) -> dict[str, Any] | None:
    """An InfiniBand async event (``port error``) or an ``IBV_WC_…_ERR`` status a WARN line names."""
    match = IB_ASYNC.search(text)
    if match is not None:
        details: dict[str, Any] = {"transport": "IB", "event": match["event"].strip(), "fatal": not match["nonfatal"]}
        if match["dev"]:
            details["device"] = match["dev"]
        return details
    status = IBV_STATUS.search(text)
    return None if status is None else {"transport": "IB", "status": status[1]}


def hccl_transport(text: str) -> dict[str, Any] | None:
    """HCCL's transport between NPUs failed (:data:`HCCL_TRANSPORT`): its error code and words."""
    match = HCCL_TRANSPORT.search(text)
    return None if match is None else {"transport": "HCCL", "error": match["error"], "code": match["code"]}


def verbs_status(text: str) -> dict[str, Any] | None:
    """A work request the HCA gave up on, in the verbs library's words (:data:`VERBS_WORDS`): the status it names,
    the device and port where the line gives them."""
    match = VERBS_WORDS.search(text)
    if match is None:
        return None
    status = "IBV_WC_RNR_RETRY_EXC_ERR" if match["what"] == "RNR" else "IBV_WC_RETRY_EXC_ERR"
    details: dict[str, Any] = {"transport": "RoCE" if "RoCE" in text else "IB", "status": status}
    if match["dev"]:
        details["device"] = match["dev"]
    return details


def socket_error(text: str) -> dict[str, Any] | None:
    """NCCL's socket transport failed: ``transport`` Socket, the ``error`` (``Connection reset by peer``,
    ``Connection closed by remote peer``, ``Broken pipe`` …) and the ``peer``."""
    match = NCCL_SOCKET.search(text)
    if match is None:
        return None
    if match["closed"] is not None:
        return {"transport": "Socket", "error": "Connection closed by remote peer", "peer": match["closed"]}
    if match["op"] is not None:
        return {"transport": "Socket", "error": match["reason"], "peer": match["peer"], "op": match["op"]}
    return {"transport": "Socket", "error": match["creason"], "peer": match["target"], "op": "connect"}


def gloo_error(text: str) -> dict[str, Any] | None:
    """gloo's TCP pair lost its peer: ``Connection closed by peer`` or a read/write error such as ``Connection
    reset by peer``."""
    match = GLOO_PAIR.search(text)
    if match is None:
        return None
    if match["closed"] is not None:
        peer, error = f"{match['host']}:{match['port']}", match["closed"]
    else:
        peer, error = f"{match['host2']}:{match['port2']}", match["reason"]
    details: dict[str, Any] = {"transport": "TCP", "backend": "gloo", "error": error, "peer": peer}
    if match["op"] is not None:
        details["op"] = match["op"].lower()
    return details
