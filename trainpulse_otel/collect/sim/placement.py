"""Where a simulated node sits in its job: node ``node_rank`` of ``nodes``, ``gpus`` GPUs on each.

Why this shape: one daemon per node is how a real job is watched, so ``-sim-nodes N -sim-node-rank I``
makes this daemon node I of an N-node job. The node simulates the *whole* job's ranks (so its step,
all-reduce and job-level report are the job's, multi-node all-reduce cost included), with its own ranks
first: internal ranks 0…gpus-1 run on its own GPUs, exactly as on a one-node job, so a scenario's per-GPU
knobs (``rank_straggler`` on GPU 5) hit this node's GPUs and the ranks on them. The report then renames
internal rank ``r`` to the job's global rank ``(r + node_rank*gpus) mod ranks`` on node
``(r // gpus + node_rank) mod nodes`` and carries only this node's own ranks; the job-level fields are
in every node's report, and the job daemon takes them from the node holding global rank 0.

A fault the whole job's simulations know (``fault_node``, ``-sim-fault-node``) happens on that node's GPUs:
that node runs it as its own; every other node keeps its own GPUs healthy, runs the fault node's simulation
beside its own, and makes the ranks there (:meth:`Placement.fault_ranks`) as slow as that simulation has them,
so its ranks wait for them as the real job's do.

With one node (the default) nothing is renamed and every rank is reported: ranks beyond the node's GPUs
live on ``node-001``… as before, and the seed is the seed, so the single-node run is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How the simulator names the job's nodes: ``node-000``, ``node-001``, …
HOSTNAME_FORMAT = "node-{:03d}"
#: Far more nodes than any job has: node I's seed is ``seed * SEED_STRIDE + I``, distinct for every (seed, I).
SEED_STRIDE = 1 << 20


def node_hostname(node: int) -> str:
    """The simulated hostname of the job's node ``node``."""
    return HOSTNAME_FORMAT.format(node)


@dataclass(frozen=True, slots=True)
class Placement:
    """This node's place in the job (``nodes=1``: a one-node job, today's simulation)."""

    gpus: int
    nodes: int = 1
    node_rank: int = 0
    #: The node whose GPUs the scenario's per-GPU faults hit (None: this node's own, as each node's scenario is).
    fault_node: int | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1 or not 0 <= self.node_rank < self.nodes:
            raise ValueError(f"node_rank must be between 0 and nodes - 1 ({self.nodes - 1}), got {self.node_rank}")
        if self.fault_node is not None and not 0 <= self.fault_node < self.nodes:
            raise ValueError(f"fault_node must be between 0 and nodes - 1 ({self.nodes - 1}), got {self.fault_node}")

    @property
    def faults_here(self) -> bool:
        """Whether the scenario's per-GPU faults hit this node's own GPUs."""
        return self.fault_node is None or self.fault_node == self.node_rank

    def fault_ranks(self) -> range:
        """The internal ranks on the fault node's GPUs (its GPU ``g`` is the range's ``g``-th)."""
        node = self.node_rank if self.fault_node is None else self.fault_node
        first = (node - self.node_rank) % self.nodes * self.gpus
        return range(first, first + self.gpus)

    @property
    def hostname(self) -> str:
        """This node's own hostname."""
        return node_hostname(self.node_rank)

    def job_ranks(self, ranks: int | None) -> int:
        """The ranks the node simulates: the job's (``nodes * gpus``), or ``ranks`` (default one a GPU) on one node."""
        if self.nodes == 1:
            return self.gpus if ranks is None else ranks
        if ranks is not None and ranks != self.nodes * self.gpus:
            raise ValueError(f"a {self.nodes}-node job of {self.gpus} GPUs a node has {self.nodes * self.gpus} ranks")
        return self.nodes * self.gpus

    def seed(self, seed: int) -> int:
        """This node's noise seed: the job's own on one node; each node its own on several."""
        return seed if self.nodes == 1 else seed * SEED_STRIDE + self.node_rank

    def global_rank(self, rank: int, ranks: int) -> int:
        """The job's number of internal rank ``rank`` (of ``ranks``)."""
        return (rank + self.node_rank * self.gpus) % ranks

    def host_of(self, rank: int, ranks: int, own_hostname: str) -> str:
        """The hostname internal rank ``rank`` runs on (``own_hostname`` for this node's own)."""
        nodes = -(-ranks // self.gpus)
        node = (rank // self.gpus + self.node_rank) % nodes
        return own_hostname if node == self.node_rank else node_hostname(node)

    def reported(self, ranks: int) -> range:
        """The internal ranks the node reports: all on a one-node job, its own GPUs' on a job across nodes."""
        return range(ranks) if self.nodes == 1 else range(self.gpus)
