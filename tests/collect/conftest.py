"""Shared setup for the collector tests."""

import sys
from pathlib import Path

# The fakes live in ``tests/fakes``; make ``tests.fakes`` importable even when
# pytest is started as a bare ``pytest`` (which does not put the root on sys.path).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
