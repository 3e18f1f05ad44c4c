"""A job's whole life: its attempts across restarts, the time each restart cost, ETTR, and how often to checkpoint.

:mod:`.interval` holds the checkpoint-interval arithmetic (Young 1974, Daly 2006) and the ETTR it predicts. Pure.
"""

from __future__ import annotations

from .interval import IntervalAdvice, advise_interval, daly_interval, expected_ettr, young_interval

__all__ = ["IntervalAdvice", "advise_interval", "daly_interval", "expected_ettr", "young_interval"]
