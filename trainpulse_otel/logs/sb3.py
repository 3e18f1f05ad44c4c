"""Stable-Baselines3's logger table (its ``HumanOutputFormat``), one block a dump, rows grouped by section:

    | time/              |          |
    |    fps             | 74       |
    |    total_timesteps | 4096     |
    | train/             |          |
    |    loss            | -0.0199  |

A block's rows become one report when its closing rule (``-----``) or the next block's first section comes:
``global_step`` the ``time/total_timesteps`` (the environment steps, SB3's own progress count), ``loss`` only
where a ``train/…loss`` went non-finite (the algorithms' losses are RL objectives — PPO's value loss swings fivefold
in a healthy run —: a level no spike is judged against, a NaN a numerical fault), ``learning_rate``, and
``samples_per_sec`` the ``time/fps``. Rows are claimed only once a section row
(``rollout/``, ``time/``, ``train/``, ``eval/``) opened the table, so another program's two-column table is not
taken for one. OpenAI Baselines' logger and Stable-Baselines 2 (its fork) print the same table without sections
(``| total_timesteps | 57344 |``, ``| value_loss | 401.4 |``): such a table is claimed from its ``total_timesteps``
row on, and once one was, from the rule that opens the next. Pure: one stream's lines in, its payloads out.
"""

from __future__ import annotations

import math
import re
from typing import Any

Payload = dict[str, Any]

ROW = re.compile(r"^\s*\|\s+(?P<key>[\w/.-]+)\s+\|\s+(?P<value>[^|]*?)\s*\|\s*$")
RULE = re.compile(r"^\s*-{8,}\s*$")
#: The sections SB3's algorithms log under.
SECTIONS = frozenset(("rollout/", "time/", "train/", "eval/"))
#: The row that says a section-less table is Baselines' (its environment steps).
BASELINES_STEPS = "total_timesteps"


class StableBaselinesLines:
    """SB3's logger tables (see the module), one stream at a time."""

    name = "stable-baselines3"

    def __init__(self) -> None:
        self._section: str | None = None  # the section of the rows now read; None: no table open
        self._rows: dict[str, str] = {}
        self._began = 0.0
        self._bare = False  # whether a section-less table (Baselines') was read: a rule opens the next

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if RULE.match(text) and (self._section is not None or self._bare):
            if self._section is not None:
                return self._close()
            self._section, self._began = "", ts  # Baselines' next table opens
            return []
        row = ROW.match(text) if "|" in text else None
        if row is None:
            return None
        key, value = row["key"], row["value"]
        if self._section is None and key == BASELINES_STEPS:
            self._section, self._bare, self._began = "", True, ts
        if key in SECTIONS and not value:
            out = self._close() if key in ("rollout/", "time/") and self._has(key) else []
            if not self._rows:
                self._began = ts
            self._section = key
            return out
        if self._section is None:
            return None  # a two-column table that no section opened: not SB3's
        self._rows[self._section + key] = value
        return []

    def _has(self, section: str) -> bool:
        return any(key.startswith(section) for key in self._rows)

    def _close(self) -> list[Payload]:
        rows, self._rows, self._section = self._rows, {}, None
        step = _number(rows.get("time/total_timesteps", rows.get(BASELINES_STEPS)))
        if step is None or not math.isfinite(step) or step < 0:
            return []
        payload: Payload = {"global_step": int(step), "timestamp": self._began}
        trained = [v for k, v in rows.items() if (k.startswith("train/") or "/" not in k) and "loss" in k]
        bad = next((v for v in map(_number, trained) if v is not None and not math.isfinite(v)), None)
        if bad is not None:  # (an RL objective: its level no spike's baseline, a NaN a numerical fault)
            payload["loss"] = bad
        lr = _number(rows.get("train/learning_rate", rows.get("learning_rate")))
        if lr is not None and math.isfinite(lr) and lr >= 0:
            payload["learning_rate"] = lr
        if (fps := _number(rows.get("time/fps", rows.get("fps")))) is not None and math.isfinite(fps) and fps > 0:
            payload["samples_per_sec"] = fps
        return [payload] if len(payload) > 2 else []

    def flush(self) -> list[Payload]:
        return self._close() if self._rows else []


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
