"""An action runner over a recording command, and the pipeline results that trigger its actions."""

from __future__ import annotations

from trainpulse_otel.actions import ActionRunner
from trainpulse_otel.config.values import actions
from trainpulse_otel.diagnose import Diagnosis, PipelineResult, RootCause, Signal, Transition

HANG = "training_stalled"


def raised(ts: float, rank: int, severity: str = "warning", pid: int = 4242) -> PipelineResult:
    """A tick that raises ``training_stalled`` for one stuck rank, explained by ``rank_hang`` (as the judge says it)."""
    subject = {"rank": rank, "hostname": "node-7"}
    evidence = {"lagging": [{"rank": rank, "pid": pid, "gpu_index": rank, "phase": "data"}], "lagging_count": 1}
    signal = Signal(HANG, severity, ts, f"no step for 45 s; rank {rank} is behind", subject, evidence)
    cause = RootCause("rank_hang", 0.9, f"rank {rank} is stuck", (HANG,), subject, "py-spy dump --pid …")
    transition = Transition(ts, "raised", HANG, severity, subject, signal.message)
    return PipelineResult(Diagnosis(ts, signals=(signal,), root_causes=(cause,)), (transition,))


class Counts(list):
    """The counter the runner is handed: (action, outcome) per decision."""

    def __call__(self, action: str, outcome: str) -> None:
        self.append((action, outcome))


def runner(*entries: dict, dry_run: bool = False, queue_size: int = 64) -> tuple[ActionRunner, Counts]:
    counts = Counts()
    return ActionRunner(actions(list(entries)), counts, dry_run, queue_size), counts
