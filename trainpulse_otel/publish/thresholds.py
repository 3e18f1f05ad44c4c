"""The thresholds listing ``trainpulse thresholds`` prints: every knob, its value, unit, basis and reason.

``-json`` gives one object per knob::

    {"name": "SIGNAL.KNOB", "signal": "SIGNAL", "knob": "KNOB", "value": 0.2, "default": 0.1,
     "overridden": true, "unit": "share", "basis": "convention", "reason": "…",
     "at_least": "SIGNAL.OTHER_KNOB" or null, "detectors": ["NAME"]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..diagnose import Vocabulary


def threshold_rows(vocabulary: Vocabulary, values: Mapping[str, float]) -> list[dict[str, Any]]:
    """One object per knob, by signal, each signal's in the order its detector declares them; ``values``: each
    knob's value by full name."""
    rows = []
    for entry in sorted(vocabulary.knobs, key=lambda e: e.signal):
        knob, value = entry.knob, values.get(entry.key, entry.knob.value)
        rows.append(
            {
                "name": entry.key,
                "signal": entry.signal,
                "knob": knob.name,
                "value": value,
                "default": knob.value,
                "overridden": value != knob.value,
                "unit": knob.unit,
                "basis": knob.basis,
                "reason": knob.reason,
                "at_least": f"{entry.signal}.{knob.at_least}" if knob.at_least else None,
                "detectors": list(entry.detectors),
            }
        )
    return rows


def format_thresholds(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned text: name, value, unit, basis, reason. An overridden value (``*``) rests on the
    configuration, not on the default's reason: its basis is ``config``, and the default's reason is quoted as
    the default's."""
    width = max((len(r["name"]) for r in rows), default=0)
    lines = [f"{'THRESHOLD':<{width}}  {'VALUE':>10}  {'UNIT':<8}  {'BASIS':<10}  REASON"]
    for r in rows:
        value = f"{r['value']:g}" + ("*" if r["overridden"] else "")
        basis, reason = r["basis"], r["reason"]
        if r["overridden"]:
            basis, reason = "config", f"set by the config's 'detectors' (the default {r['default']:g}: {reason})"
        lines.append(f"{r['name']:<{width}}  {value:>10}  {r['unit']:<8}  {basis:<10}  {reason}")
    overridden = sum(r["overridden"] for r in rows)
    lines.append(f"{len(rows)} thresholds, {overridden} overridden (*) by the config's 'detectors'")
    return "\n".join(lines)
