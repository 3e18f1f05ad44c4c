"""A launcher's label before every line changes no excerpt's diagnosis: a fifth of the corpus's ``train`` split
replayed bare and behind srun's task label, a Ray actor's prefix, pdsh's host, Docker Compose's service,
kubectl's pod, in a terminal's colours and with CRLF line ends (:mod:`trainpulse_otel.evaluation.shapes`;
``scripts/log-shapes`` runs every shape on every excerpt)."""

from __future__ import annotations

from pathlib import Path

from trainpulse_otel.config import Settings
from trainpulse_otel.evaluation.log_corpus import HEALTHY, load_index
from trainpulse_otel.evaluation.shapes import LABELS, SHAPES, Change, shape_changes
from trainpulse_otel.runtime import discover

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"


def test_a_launcher_s_label_on_every_line_changes_no_diagnosis():
    index = load_index(CORPUS)
    sample = [e for e in index if e.split == "train"][::5]
    classes = frozenset(e.label for e in index) - {HEALTHY}
    changes = shape_changes(CORPUS, sample, classes, Settings(), discover(), {name: SHAPES[name] for name in LABELS})
    assert set(changes) == set(LABELS) and set(LABELS) < set(SHAPES)
    assert {name: changed for name, changed in changes.items() if changed} == {}


def test_a_shape_that_changes_a_diagnosis_is_listed_with_both_classes(tmp_path):
    """A shape that takes the words away (every line blanked): the excerpt it changed, with both classes."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "crash.log").write_text(
        'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\nValueError: bad\n'
    )
    (tmp_path / "index.json").write_text(
        '{"version": 1, "files": [{"file": "train/crash.log", "class": "rank_crashed"}]}'
    )
    shapes = {"srun --label": SHAPES["srun --label"], "blanked": lambda lines: ["" for _ in lines]}
    changes = shape_changes(tmp_path, load_index(tmp_path), frozenset({"rank_crashed"}), Settings(), discover(), shapes)
    assert changes == {
        "srun --label": [],
        "blanked": [Change("train/crash.log", "rank_crashed", "rank_crashed", "healthy")],
    }
