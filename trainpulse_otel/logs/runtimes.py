"""Failure lines of the runtimes around a job, in the words their sources print (each form's source: docs/logs.md).

JAX's coordination service (a task that stopped sending heartbeats, the process terminated because another died),
XLA's rendezvous (a collective's threads stuck, its termination timeout), Horovod's shutdown and stall inspector,
Open MPI's runtime, PMIx and UCX (a rank aborted or exiting improperly, a daemon or peer lost, a TCP read failing),
PyTorch's process-group watchdog ending on an NCCL error, c10d's store losing its peer, the data loader's worker
segfault, RCCL's message queue, Ascend's CANN codes, and the device runtimes' out-of-memory and device-lost codes
(ROCm's HIP and HSA, Intel's Unified Runtime, MindSpore), launchers and clusters naming what died, the NIC's kernel
lines. :func:`failure_said` reads one line into ``(kind, details, rank)``: ``timeout``, ``link``, ``crash``, ``oom``,
``gpu``, ``xid`` (an XID another tool read) or ``hang`` (a trainer's or launcher's own hang detector: nvidia-resiliency-ext's
rank monitor, faulthandler's ``Timeout (0:30:00)!``, torch elastic's expired timers, OLMo-core's, NeMo-RL's, TRL's). Not a failure: the store's ``Failed to recv, got 0 bytes. Connection
was likely closed`` that PyTorch 2.4+'s heartbeat threads print when rank 0's store shuts down at a healthy job's
end. Pure: one substring test before any regex.
"""

from __future__ import annotations

import re
from typing import Any

from .marks import any_of
from .words import failure_class

#: (a regex whose match is the failure, its kind), first match wins; a ``rank``/``rank2`` group names the rank at
#: fault, ``seconds`` a timeout, ``xid`` the XID.
FORMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        # JAX / XLA: a peer task died (its heartbeats stopped), a collective's rendezvous stuck
        ((r"Terminating process because (?:the coordinator detected missing heartbeats|the JAX distributed service "
         r"detected fatal errors|of missing heartbeat response from the coordinator)"), "crash"),
        (r"following tasks are unhealthy \(stopped sending heartbeats\)|\bTask (?P<rank>\d+) heartbeat timeout", "crash"),
        (r"Failed to meet rendezvous '[^']*': (?P<error>.+)", "nccl"),  # torch_xla's mesh service, its reason after
        ((r"This thread has been waiting for .{0,400}? for \d+ seconds and may be stuck"
         r"|Termination timeout (?:for .{0,400}? )?of (?P<seconds>\d+) seconds exceeded"), "timeout"),
        # Horovod
        (r"One or more rank \(marked by \"!\"\) is stalled for longer than (?P<seconds>\d+) seconds", "timeout"),
        (r"Horovod has been shut down\. This was caused by an exception on one of the ranks", "crash"),
        # Open MPI, PMIx, UCX
        (r"MPI_ABORT was invoked on rank (?P<rank>\d+)|exited due to process rank (?P<rank2>\d+) with PID", "crash"),
        (r"An MPI communication peer process has unexpectedly disconnected", "crash"),
        ((r"(?:ORTE|PRTE) has lost communication with (?:a |its )?remote daemon|\bmca_btl_tcp_\w+: \w+ failed: "
         r"|PMIX ERROR: (?:UNREACHABLE|PMIX_ERR_UNREACH)|UCX\s+ERROR .{0,200}?(?:retry count exceeded|timeout|"
         r"[Cc]onnection reset)|unhandled timeout error|will not be handled since no error callback is installed"), "link"),
        # PyTorch: the watchdog ending on NCCL's error, the store's peer gone, a worker's segfault
        ((r"(?:NCCL|Process group) watchdog thread terminated with exception: (?P<error>.+)"
         r"|raised the following async exception: (?P<error2>.+)"), "nccl"),
        (r"client socket has failed to connect to any network address", "link"),  # (not ``got 0 bytes``: see above)
        (r"\bremote error detected from rank: (?P<rank>\d+)", "crash"),
        (r"Unexpected segmentation fault encountered in worker", "crash"),
        ((r"Message Queue timed out waiting for all ranks|\bWork \d+ timed out in blocking wait|DEADLINE_EXCEEDED: Barrier timed"
         r" out"), "timeout"),
        (r"\bunhandled cuda error\b", "crash"),
        (r"Collective ops is aborted by: .{0,80}?(?:failed to connect|[Cc]onnection|[Uu]navailable)", "link"),
        (r"NPU function error: (?:UCE ERROR|HBM MULTI BIT ECC ERROR|SUSPECT MEM ERROR|HCCS LINK ERROR|UB LINK ERROR)", "gpu"),
        # Ascend's CANN codes: NPU memory, the RoCE link, the port, the cluster's detection
        (r"\bEI0011\b", "oom"),
        (r"\b(?:EI0013|EJ0002|EI0015)\b", "link"),
        # an NPU kernel failing on the device (``E39999: … an exception occurred during AICPU execution``), MindSpore's
        # ``Launch kernel failed: Bprop/gradDense/Reshape-op278``
        (r"an exception occurred during (?:AICPU|AICORE|AIV) execution|\bLaunch kernel failed: \S", "crash"),
        # device runtimes' codes
        ((r"HIP error: out of memory|\bhipErrorOutOfMemory\b|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|PI_ERROR_OUT_OF_RESOURCES"
         r"|HSA_STATUS_ERROR_OUT_OF_RESOURCES|Out of Memory!!! Request memory size|report_tensor_allocations_upon_oom"),
         "oom"),
        (r"UR_RESULT_ERROR_DEVICE_LOST|\bhipErrorLaunchFailure\b", "gpu"),
        (r"HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION|OutOfResources: out of resource", "crash"),
        (r"\bCUFFT_ALLOC_FAILED\b", "oom"),
        # launchers and clusters naming the rank or replica that died: Composer's, Vertex AI's, horovodrun's
        ((r"\bRank (?P<rank>\d+) crashed with exit code|\bGlobal rank (?P<rank2>\d+) \(PID \d+\) exited with code [1-9-]"
          r"|^Process (?P<rank3>\d+) exit with status code [1-9]"
         r"|The replica \w+ \d+ (?:ran out-of-memory and )?exited with a non-zero status"), "crash"),
        # the Kubernetes device plugin marking a GPU unhealthy (an XID it read)
        (r"XidCriticalError: Xid=(?P<xid>\d+)|'nvidia\.com/gpu' device marked unhealthy", "xid"),
        # a trainer's or launcher's own hang detector (no step in its time), with the time it waited where it says
        (
            (
                r"Did not get (?:subsequent|initial) heartbeat\. Waited (?P<seconds>\d+)(?:\.\d+)? seconds"
                r"|Section '[^']*' has been open for (?P<seconds2>\d+)(?:\.\d+)? seconds|Was out of section for "
                r"(?P<seconds3>\d+)(?:\.\d+)? seconds|no train step completed in (?P<seconds4>\d+)s|has not been updated for "
                r"(?P<seconds5>\d+) seconds|heartbeat stale: (?P<seconds6>\d+)s|health check has been hanging for "
                r"(?P<seconds7>\d+)(?:\.\d+)? seconds|^\s*Timeout \((?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)(?:\.\d+)?\)!\s*$"
                r"|Interruption\.(?:SOFT|HARD)_TIMEOUT|made NO progress|consecutive training cycles without progress"
                r"|Reaping worker_(?:pid|id)=\[[^\]]*\]\. Expired timers?:|Timers expired for run|Workload has failed to step"
                r"|TimeoutManager is stuck|DUE TO JOB NOT ENDING WITH SIGNALS"
            ),
            "hang",
        ),
        # the node's NIC: mlx5's health and port events, InfiniBand's port going down (the kernel's lines)
        (
            (
                r"mlx5_core .{0,80}?(?:health compromised|Fatal error \d+ detected|Port module event\[error\])"
                r"|Health issue observed, firmware internal error|\bPort: \d+ Link DOWN\b"
            ),
            "link",
        ),
    )
)  # fmt: skip
#: What such a line holds (the scanner's cheap test).
MARKS = (
    "Terminating process because", "heartbeat", "may be stuck", "Termination timeout", "is stalled for longer",
    "Horovod has been shut down", "MPI_ABORT", "exited due to process rank", "unexpectedly disconnected",
    "has lost communication", "mca_btl_tcp_", "PMIX ERROR", "UCX", "unhandled timeout", "no error callback",
    "watchdog thread terminated", "async exception", "any network address", "remote error",
    "segmentation fault encountered", "Message Queue timed out", "EI001", "EJ0002", "HIP error", "hipError",
    "UR_RESULT_ERROR", "PI_ERROR_OUT_OF", "HSA_STATUS_ERROR", "Out of Memory!!!", "allocations_upon_oom",
    "in blocking wait", "Barrier timed out", "unhandled cuda error", "Collective ops is aborted",
    "NPU function error", "OutOfResources", "CUFFT_ALLOC", "mlx5_core", "Health issue observed", "Link DOWN",
    "crashed with exit code", "exited with code", "exit with status code", "exited with a non-zero status", "XidCriticalError",
    "marked unhealthy", "has been open for", "out of section", "no train step completed", "has not been updated for",
    "Timeout (", "Interruption.", "made NO progress", "without progress", "Expired timer", "Timers expired",
    "failed to step", "TimeoutManager is stuck", "NOT ENDING WITH SIGNALS", "hanging for", "Failed to meet rendezvous",
    "exception occurred during A", "Launch kernel failed",
)  # fmt: skip
_MARKED = any_of(MARKS)


def failure_said(text: str) -> tuple[str, dict[str, Any], int | None] | None:
    """``(kind, details, rank)`` of a runtime's failure line (see the module docstring), or None."""
    if _MARKED.search(text) is None:
        return None
    for pattern, kind in FORMS:
        if (match := pattern.search(text)) is None:
            continue
        said = match.groupdict()
        details: dict[str, Any] = {"error": text[match.start() :].strip()[:200]}
        waited = next((said[k] for k in ("seconds", *(f"seconds{i}" for i in range(2, 8))) if said.get(k)), None)
        if waited is not None:
            details["timeout_ms"] = int(waited) * 1000
        if kind == "hang":  # told as the silence the detector saw: how long, where it says
            seconds = int(said["h"]) * 3600 + int(said["m"]) * 60 + int(said["s"]) if said.get("h") else waited
            details = {"gap_s": None if seconds is None else float(seconds), "detector": details["error"]}
        if kind == "nccl":  # the watchdog's (or a work's) exception: its words say what failed
            error = said.get("error") or said.get("error2") or ""
            kind = failure_class(error, collective=True) or "crash"
        if kind == "xid":  # a fatal XID is the GPU's; a device marked unhealthy for no XID named, too
            kind, details = ("xid", {**details, "xid": int(said["xid"])}) if said.get("xid") else ("gpu", details)
        rank = said.get("rank") or said.get("rank2") or said.get("rank3")
        return kind, details, None if rank is None else int(rank)
    return None
