"""Settings and their values: every key declared once, resolved defaults < file < environment < flags.

:mod:`.settings` holds the table of keys (:data:`OPTIONS`) and :class:`Settings`; :mod:`.values` the parsers of
structured values (actions, extra collectors), :mod:`.durations` Go-style durations, :mod:`.limits` the front
door's limits. The package is a leaf: it imports nothing else of TrainPulse.
"""

from .settings import (
    ENV_PREFIX,
    MODES,
    NON_SETTING_ENV,
    OPTIONS,
    OPTIONS_BY_KEY,
    ConfigError,
    Option,
    Settings,
    load_settings,
)

__all__ = [
    "ENV_PREFIX",
    "MODES",
    "NON_SETTING_ENV",
    "OPTIONS",
    "OPTIONS_BY_KEY",
    "ConfigError",
    "Option",
    "Settings",
    "load_settings",
]
