"""The terminal dashboard (``trainpulse top``): consumes snapshots, never detectors."""
