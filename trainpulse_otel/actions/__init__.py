"""Actions on a signal: a command or a webhook when a signal is raised (docs/actions.md).

:mod:`.policy` decides purely which actions a tick's transitions call for
(matching, cooldown, warm-up); :mod:`.event` says what an action is told (the
JSON and the ``TRAINPULSE_*`` variables); :mod:`.runner` runs them off the
tick's thread, logs and counts them. The composition root builds the runner
for the daemon (``runtime/assemble.py``).
"""

from .event import SignalEvent, signal_event
from .policy import ActionPolicy, Decision, check_actions
from .runner import ActionRunner

__all__ = ["ActionPolicy", "ActionRunner", "Decision", "SignalEvent", "check_actions", "signal_event"]
