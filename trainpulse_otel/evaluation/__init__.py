"""``trainpulse eval``: the diagnosis scored against the simulator's faults, beside the runtime, not in it.

Every scenario is replayed through the composition root's own replay step
(:mod:`.sim_replay`), so the figures are those of the real path; the single
faults and the healthy run are scored in :mod:`.report`, two faults at once in
:mod:`.pairs`, against an answer key read from the raw samples
(:mod:`.ground_truth`). The package uses the runtime, the judge, the
simulator and the samples; none of them uses it (``tests/test_architecture.py``).
"""

from .pairs import fault_pairs, parse_pairs
from .report import EvalReport, evaluate, format_report
from .sim_replay import VARIANTS, Variant

__all__ = ["VARIANTS", "EvalReport", "Variant", "evaluate", "fault_pairs", "format_report", "parse_pairs"]
