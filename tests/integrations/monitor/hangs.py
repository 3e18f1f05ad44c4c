"""What the real gloo hang jobs share: the detection bound they are held to, and a run's timeline events."""

from __future__ import annotations

#: The issue's figure: the stall named within 45 s of the block (its own definition is 30 s without a step).
MAX_DETECTION_S = 45.0


def events(result: dict, event: str, name: str) -> list[dict]:
    key = "cause" if event == "top_cause" else "signal"
    return [e for e in result["timeline"] if e["event"] == event and e.get(key) == name]
