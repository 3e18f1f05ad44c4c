"""The composition root: Settings in, a running pipeline out."""
