"""An InfiniBand or RoCE port of a host at one instant: its state and its error counters.

What ``/sys/class/infiniband/<device>/ports/<port>/`` shows (``state``, ``phys_state``, ``rate``, ``link_layer``,
``counters/*``), or node-exporter's ``node_infiniband_*`` series of the same port. Counters are cumulative as the
HCA keeps them: a counter that goes back (a reset, a reboot) starts again, it is no error; ``None`` is a counter
this port or driver does not keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The port error counters the contract names, as ``counters/`` (the port's PMA counters) names its files (and
#: node-exporter its series, ``node_infiniband_<name>_total``), each with what a rise of it means.
PMA_COUNTERS: dict[str, str] = {
    "symbol_error": "minor link errors detected on a physical lane (bad cable, dirty optic)",
    "link_downed": "times the link went down after training (a flap)",
    "link_error_recovery": "times the link recovered from an error (a retrain)",
    "port_rcv_errors": "packets received with an error (malformed, bad CRC)",
    "port_xmit_discards": "outbound packets discarded (the port down or congested)",
    "excessive_buffer_overrun_errors": "receive-buffer overruns past the threshold (flow control broken)",
    "local_link_integrity_errors": "local physical errors past the threshold",
    "port_rcv_remote_physical_errors": "packets received marked bad by a remote physical error (EBP)",
}
#: The driver's statistics NVSentinel reads beside them, from ``hw_counters/`` (64-bit: they never saturate).
HW_COUNTERS: dict[str, str] = {
    "rnr_nak_retry_err": "connections severed after the receiver-not-ready retries ran out",
    "local_ack_timeout_err": "transfers whose ACK did not come in time (a path or a peer in trouble)",
}
#: Every counter a port sample keeps, in this order.
PORT_COUNTERS: dict[str, str] = {**PMA_COUNTERS, **HW_COUNTERS}


@dataclass(frozen=True, slots=True)
class PortSample:
    """One InfiniBand/RoCE port: ``device`` (``mlx5_0``) and ``port`` (1-based) identify it on its node (``node``:
    None is this daemon's own).

    ``state`` is the logical state's name (``ACTIVE``, ``DOWN``, ``INIT``), ``phys_state`` the physical one's
    (``LinkUp``, ``Polling``, ``Disabled``), ``rate_gbps`` the rate it trained at, ``link_layer`` ``InfiniBand`` or
    ``Ethernet`` (RoCE). ``counters`` maps a name of :data:`PORT_COUNTERS` to its cumulative value."""

    device: str
    port: int
    state: str | None = None
    phys_state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    counters: tuple[tuple[str, int], ...] = ()
    node: str | None = None

    @property
    def key(self) -> PortKey:
        """What identifies the port in a job: its node, device and port number."""
        return (self.node, self.device, self.port)

    def counter(self, name: str) -> int | None:
        """The cumulative value of one counter, or None when the port does not keep it."""
        return next((value for key, value in self.counters if key == name), None)

    def to_dict(self) -> dict[str, Any]:
        """As a trace line holds it: the known fields, the counters as ``{name: count}``."""
        out: dict[str, Any] = {"device": self.device, "port": self.port}
        for key in ("state", "phys_state", "rate_gbps", "link_layer"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        return out | {"counters": dict(self.counters)}

    @property
    def label(self) -> str:
        """How messages name the port: ``mlx5_0 port 1``, ``mlx5_0 port 1 on node-3``."""
        return f"{self.device} port {self.port}" + (f" on {self.node}" if self.node else "")


#: A port's identity in a job view: (node hostname or None for this daemon's own, device, port number).
PortKey = tuple[str | None, str, int]


def port_order(port: PortSample) -> tuple[str, str, int]:
    """The order ports are listed in: this daemon's own first, then each other node's, by device and port."""
    node, device, number = port.key
    return (node or "", device, number)
