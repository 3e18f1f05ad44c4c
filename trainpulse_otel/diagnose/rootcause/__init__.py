"""Root-cause inference: rules propose candidate causes, the ranking orders them.

The built-in rules live by family (:mod:`.hardware`, :mod:`.ranks`,
:mod:`.waits`, :mod:`.residual`) and are registered, like third-party ones, as
``trainpulse.root_causes`` entry points; :func:`infer_root_causes` is handed
the rules to use.
"""

from .ranking import Candidate, RootCauseRule, Rule, base_confidence, infer_root_causes, pct, rank_candidates, symptoms
from .ranks import stragglers_sync_share

__all__ = [
    "Candidate",
    "RootCauseRule",
    "Rule",
    "base_confidence",
    "infer_root_causes",
    "pct",
    "rank_candidates",
    "stragglers_sync_share",
    "symptoms",
]
