"""``python -m trainpulse_otel`` runs the ``trainpulse`` command line."""

import sys

from .cli import main

sys.exit(main())
