"""The rest of the job as this simulated node's job daemon hears it: the other nodes, and one going silent.

A scenario with ``job={"peer_nodes": P}`` makes the simulated daemon node-000 of a job of ``P + 1``
nodes *and* that job's daemon (as the job daemon on a job's first node is): the node simulates every
rank of the job (ranks beyond its GPUs already live on ``node-001``…), and :func:`job_view` turns one
tick of it into what a job daemon holds — its own GPUs, host and ranks, and one
:class:`~trainpulse_otel.samples.NodeReport` per other node with that node's GPUs and host. The other
nodes run the same job on the same hardware, so their GPUs are this node's, each a little warmer or
cooler (a fixed offset per node and GPU: no draw from the node's random stream, which keeps every other
scenario's samples as they were).

While the ``peer_lost`` knob is on, node ``JobConfig.lost_peer`` sends nothing: no report, and its
ranks leave the job's report — their last heartbeats are all the job daemon keeps of them. The job's
collective cannot complete without them, so no step finishes (the node's model holds every other rank
inside the all-reduce).
"""

from __future__ import annotations

from dataclasses import replace

from ...samples import NodeReport
from ..base import Collected
from .placement import node_hostname

#: How far another node's GPU runs from this node's same GPU, °C: a fixed pattern over nodes and GPUs.
PEER_TEMPERATURE_SPREAD_C = 2.0


def job_view(collected: Collected, peers: int, lost: int | None) -> Collected:
    """``collected`` (node-000's tick of a job of ``peers + 1`` nodes) as the job daemon holds it;
    node ``lost`` (1…peers) silent, or None."""
    silent = node_hostname(lost) if lost is not None else None
    reports = tuple(_peer(collected, node_hostname(n), n) for n in range(1, peers + 1) if node_hostname(n) != silent)
    training = collected.training
    if training is not None and silent is not None:
        training = replace(training, ranks=tuple(r for r in training.ranks if r.hostname != silent))
    return replace(collected, training=training, nodes=reports)


def _peer(collected: Collected, hostname: str, node: int) -> NodeReport:
    gpus = None
    if collected.gpus is not None:
        gpus = tuple(
            g.on_node(hostname)
            if g.temperature_celsius is None
            else replace(g, temperature_celsius=g.temperature_celsius + _offset(node, g.index), node=hostname)
            for g in collected.gpus
        )
    return NodeReport(hostname, gpus=gpus, host=collected.host)


def _offset(node: int, gpu: int) -> float:
    """A node's GPU's fixed temperature offset, in [-spread, +spread]."""
    return round(PEER_TEMPERATURE_SPREAD_C * (((node * 7 + gpu * 3) % 9) / 4.0 - 1.0), 1)
