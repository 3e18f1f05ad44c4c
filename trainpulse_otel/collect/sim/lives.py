"""Jobs that fail and are restarted from their checkpoints: the simulator's whole lives, for ``trainpulse eval``.

Each is a torchrun job whose output the daemon reads: a rank dies of an exception, torchrun ends the job, says
it restarts the worker group and starts it ``restart_after_s`` later; the restarted job loads its last
checkpoint (printing how long it took) and does the steps since it again. The simulated node keeps each
attempt's steps (:attr:`~.node.SimulatedNode.attempts`), which the evaluation scores the job's life against.
Not in the fault catalogue: no signal is the answer here, the ledger's figures are.
"""

from __future__ import annotations

from .knobs import Effect
from .scenarios import Scenario

#: Every life scenario's job: its output read, torchrun restarting it 45 s after it went down, 12 s of that the
#: checkpoint's load (a 16 GB llama-3-8b checkpoint from shared storage).
RESTARTED_JOB = {"logs": True, "restart_after_s": 45.0, "checkpoint_load_s": 12.0}


def _life(name: str, description: str, *effects: Effect, duration_s: float, every_s: float) -> Scenario:
    return Scenario(
        name=name,
        description=description,
        onset_s=effects[0].onset_s or 0.0,
        duration_s=duration_s,
        expected_signals=frozenset(),
        allowed_signals=frozenset(),
        expected_cause=None,
        effects=(Effect("checkpoint_every_s", every_s, onset_s=0.0), *effects),
        job=RESTARTED_JOB,
    )


_LIVES = (
    _life(
        "restart_from_checkpoint",
        "A checkpoint every 2 minutes; rank 1 raises at 200 s, 80 s past the last save; torchrun restarts the job "
        "45 s later and it does those 80 s of steps again.",
        Effect("rank_exit", 1.0, gpus=(1,), onset_s=200.0),
        duration_s=480.0,
        every_s=120.0,
    ),
    _life(
        "restart_before_first_checkpoint",
        "A checkpoint every 10 minutes; rank 3 raises at 230 s, before the first save: the restarted job begins again "
        "from where it started.",
        Effect("rank_exit", 1.0, gpus=(3,), onset_s=230.0),
        duration_s=480.0,
        every_s=600.0,
    ),
    _life(
        "restarted_twice",
        "A checkpoint every 2 minutes; rank 1 raises at 200 s and, in the restarted job, rank 5 at 420 s: three "
        "attempts, two interruptions.",
        Effect("rank_exit", 1.0, gpus=(1,), onset_s=200.0),
        Effect("rank_exit", 1.0, gpus=(5,), onset_s=420.0),
        duration_s=720.0,
        every_s=120.0,
    ),
)

#: The life scenarios by name.
LIVES: dict[str, Scenario] = {s.name: s for s in _LIVES}
