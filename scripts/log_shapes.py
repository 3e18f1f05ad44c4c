"""Replay a labelled corpus's excerpts bare and in the shapes consoles give them; print what each shape changed.

    scripts/log-shapes [DIR] [--split train] [--shape NAME ...]

DIR defaults to the repository's corpus (tests/fixtures/logs/corpus); only the ``train`` split is read unless
``--split`` names another (the ``test`` split is not for tuning). Prints, per shape, the excerpts whose given class
it changed, then a summary line per shape. docs/evaluation.md holds the figures.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainpulse_otel.config import Settings
from trainpulse_otel.evaluation.log_corpus import HEALTHY, load_index
from trainpulse_otel.evaluation.shapes import SHAPES, shape_changes
from trainpulse_otel.runtime import discover

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs" / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--split", default="train")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="a shape (default: every one)")
    args = parser.parse_args()
    index = load_index(args.root)
    entries = [e for e in index if e.split == args.split]
    classes = frozenset(e.label for e in index) - {HEALTHY}
    plugins = discover()
    shapes = {name: SHAPES[name] for name in args.shape or SHAPES}
    changes = shape_changes(args.root, entries, classes, Settings(), plugins, shapes)
    for name, changed in changes.items():
        for c in changed:
            print(f"{name}: {c.file}: {c.label}; bare {c.bare}, shaped {c.shaped}")
    for name, changed in changes.items():
        print(f"{name:28s} changed {len(changed):4d} of {len(entries)}")


if __name__ == "__main__":
    main()
