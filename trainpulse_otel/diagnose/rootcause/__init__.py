"""Root-cause inference: rules propose candidate causes, the ranking orders them.

The built-in rules live by family (:mod:`.hardware`, :mod:`.gpu_failure`,
:mod:`.nodes`, :mod:`.links`, :mod:`.hang`, :mod:`.ranks`, :mod:`.waits`, :mod:`.residual`,
:mod:`.numerics`) and are listed in :mod:`..builtins`; third-party rules come
from the ``trainpulse.root_causes`` entry points. :func:`infer_root_causes` is
handed the rules to use.
"""

from .common import base_confidence, pct, symptoms
from .ranking import Candidate, RootCauseRule, Rule, infer_root_causes, rank_candidates
from .ranks import stragglers_sync_share, stragglers_wait_ms

__all__ = [
    "Candidate",
    "RootCauseRule",
    "Rule",
    "base_confidence",
    "infer_root_causes",
    "pct",
    "rank_candidates",
    "stragglers_sync_share",
    "stragglers_wait_ms",
    "symptoms",
]
