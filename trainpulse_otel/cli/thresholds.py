"""``trainpulse thresholds [-json]``: every knob the detectors decide by, with the configuration's overrides."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .flags import add_setting_flags, configure, settings_of


def add_thresholds_parser(commands: Any) -> None:
    """The ``thresholds`` subcommand's parser."""
    thr = commands.add_parser(
        "thresholds",
        help="list every detector's thresholds: value, unit, basis, reason",
        allow_abbrev=False,
        description="List every knob the detectors decide by (SIGNAL.KNOB), with the overrides of the "
        "config's 'detectors' key applied and checked.",
    )
    thr.add_argument("-json", "--json", action="store_true", help="print a JSON list, one object per knob")
    add_setting_flags(thr, ("detectors", "log_level"))


def cmd_thresholds(args: argparse.Namespace) -> int:
    """``trainpulse thresholds``: the listing, as text or JSON."""
    from ..publish.thresholds import format_thresholds, threshold_rows
    from ..runtime import discover, knob_overrides

    settings = settings_of(args)
    configure(settings, quiet=True)
    plugins = discover(disabled=settings.disabled_detectors)
    values = plugins.vocabulary.knob_values(knob_overrides(plugins, settings.detector_knobs))
    rows = threshold_rows(plugins.vocabulary, values)
    print(json.dumps(rows, indent=2) if args.json else format_thresholds(rows))
    return 0
