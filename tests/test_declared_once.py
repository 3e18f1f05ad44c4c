"""The judge's vocabulary is declared once: each signal and cause name in a few files, decisions in knobs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainpulse_otel.diagnose import VOCABULARY

PACKAGE = Path(__file__).resolve().parents[1] / "trainpulse_otel"
#: A built-in signal (or cause) is written in its detector (or rule) module, the simulated scenario that shows it,
#: the simulator's answer key, and at most one more place; everything else reads its spec.
MAX_FILES_PER_NAME = 4
#: Numbers in detector and rule bodies that are not declared knobs or named constants.
MAX_BARE_NUMBERS = 20
#: Not hand-set: identities and halves/doubles/pairs, and unit conversions (min, percent, ms, KiB).
TRIVIAL = {0, 1, 2, 0.5}
UNITS = {60, 100, 1000, 1024}


def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("name", [*VOCABULARY.signal_names, *VOCABULARY.cause_names])
def test_a_signal_or_cause_name_is_written_in_at_most_four_package_files(name):
    quoted = (f'"{name}"', f"'{name}'")
    files = [p.relative_to(PACKAGE) for p, text in _sources().items() if any(q in text for q in quoted)]
    assert len(files) <= MAX_FILES_PER_NAME, f"{name} is written in {[str(f) for f in files]}"


def bare_numbers(tree: ast.Module) -> list[tuple[int, float]]:
    """Numeric literals inside function bodies, less what is not a hand-set number: :data:`TRIVIAL` values, unit
    conversions, exponents, indexes and slices, and ``round()``'s digits."""
    structural = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "round" and len(node.args) == 2:
            structural.add(id(node.args[1]))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            structural.add(id(node.right))
        elif isinstance(node, ast.Subscript):
            structural.update(id(n) for n in ast.walk(node.slice))
    found = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Constant)
                    and type(node.value) in (int, float)
                    and id(node) not in structural
                    and node.value not in TRIVIAL | UNITS
                ):
                    found.add((node.lineno, node.value))
    return sorted(found)


def test_detector_and_rule_bodies_decide_by_knobs_and_named_constants():
    found = {
        f"{path.parent.name}/{path.name}:{line}": value
        for path, text in _sources().items()
        if path.parent.name in ("detectors", "rootcause")
        for line, value in bare_numbers(ast.parse(text))
    }
    assert len(found) <= MAX_BARE_NUMBERS, found


def test_the_count_sees_a_threshold_written_into_a_body():
    tree = ast.parse("def judge(x):\n    return x[2] ** 2 > 0.37 * 1000 and round(x, 4) < 17\n")
    assert bare_numbers(tree) == [(2, 0.37), (2, 17)]
