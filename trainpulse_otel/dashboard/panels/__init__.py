"""The dashboard's panels: one module per panel, each ``(view, width) -> variants``."""
