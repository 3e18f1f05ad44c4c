"""docs/thresholds.md, docs/signals.md and docs/configuration.md stay true to the code: every knob with its current
value, every signal's and cause's spec, every settings key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainpulse_otel.config import OPTIONS
from trainpulse_otel.diagnose import VOCABULARY, CauseSpec, KnobEntry, SignalSpec

DOCS = Path(__file__).resolve().parents[1] / "docs"
SIGNALS = (DOCS / "signals.md").read_text(encoding="utf-8")
THRESHOLDS = (DOCS / "thresholds.md").read_text(encoding="utf-8")
CONFIGURATION = (DOCS / "configuration.md").read_text(encoding="utf-8")
NONE = "—"


def knob_row(entry: KnobEntry) -> str:
    """The start of a knob's row in the Thresholds table: its full name, value (``%g``), unit and basis (the
    table is ``trainpulse thresholds -json`` rendered a row per knob)."""
    knob = entry.knob
    return f"| `{entry.key}` | {knob.value:g} | {knob.unit} | {knob.basis} |"


def signal_row(spec: SignalSpec) -> str:
    """A signal's row in the health score's table of specs."""
    component = f"`{spec.component}`" if spec.component else NONE
    forecast = "yes" if spec.predictive else NONE
    claims = "yes" if spec.explainer_claims else NONE
    return (
        f"| `{spec.name}` | {spec.layer} | {spec.impact:g} | {component} | {forecast} | {claims} "
        f"| {spec.policy.clear_after_s:g} s |"
    )


def cause_row(spec: CauseSpec) -> str:
    """A cause's row in the root causes' table of specs."""
    books = f"`{spec.books}`" if spec.books else NONE
    wait = "yes" if spec.wait else NONE
    explains = ", ".join(f"`{name}`" for name in spec.explains)
    return f"| `{spec.name}` | {spec.layer} | {books} | {wait} | {explains} |"


def section(name: str) -> str:
    """The text of a signal's entry under "The signals": from its heading to the next."""
    found = re.search(rf"^### `{name}`[^\n]*\n(.*?)(?=^##)", SIGNALS, re.DOTALL | re.MULTILINE)
    assert found, f"docs/signals.md has no entry for {name}"
    return found[1]


@pytest.mark.parametrize("entry", VOCABULARY.knobs, ids=lambda e: e.key)
def test_every_knob_is_in_the_thresholds_table_with_its_current_value(entry):
    assert knob_row(entry) in THRESHOLDS, f"docs/thresholds.md: regenerate the row of {entry.key}"


def test_the_thresholds_table_lists_no_knob_the_code_lacks():
    listed = set(re.findall(r"^\| `([a-z_]+\.[a-z_0-9]+)` \|", THRESHOLDS, re.MULTILINE))
    assert listed == {e.key for e in VOCABULARY.knobs}


@pytest.mark.parametrize("name", VOCABULARY.signal_names)
def test_every_signal_entry_says_its_meaning_detection_knobs_evidence_and_what_to_do(name):
    text = section(name)
    for part in ("**Means:**", "**Evidence", "**Do:**", "**Knobs**"):
        assert part in text, f"{name}'s entry lacks {part}"
    missing = [e.knob.name for e in VOCABULARY.knobs if e.signal == name and f"`{e.knob.name}`" not in text]
    assert missing == [], f"{name}'s entry does not name its knobs {missing}"


@pytest.mark.parametrize("name", VOCABULARY.signal_names)
def test_every_signal_spec_is_in_the_health_table(name):
    assert signal_row(VOCABULARY.signals[name]) in SIGNALS


@pytest.mark.parametrize("name", VOCABULARY.cause_names)
def test_every_cause_spec_and_its_meaning_and_remediation_are_documented(name):
    spec = VOCABULARY.causes[name]
    assert cause_row(spec) in SIGNALS
    assert re.search(rf"^\| `{name}` \| {re.escape(spec.meaning)} \|", SIGNALS, re.MULTILINE), name


@pytest.mark.parametrize("key", [o.key for o in OPTIONS])
def test_every_settings_key_is_in_the_configuration_table(key):
    assert f"\n| `{key}` |" in CONFIGURATION


def test_every_count_of_the_thresholds_in_the_docs_is_the_vocabulary_s():
    counts = {int(n) for n in re.findall(r"\b(\d+) thresholds\b", SIGNALS + THRESHOLDS + CONFIGURATION)}
    assert counts <= {len(VOCABULARY.knobs)}, f"the docs count {sorted(counts)}, the code {len(VOCABULARY.knobs)}"
