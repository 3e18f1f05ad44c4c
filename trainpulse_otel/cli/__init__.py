"""The ``trainpulse`` command line: every command, its flags and its usage errors.

The top of the package's layers: it calls the composition root (:mod:`trainpulse_otel.runtime`) and the
front ends, and nothing outside it imports it. ``trainpulse = trainpulse_otel.cli:main``.
"""

from .main import main

__all__ = ["main"]
