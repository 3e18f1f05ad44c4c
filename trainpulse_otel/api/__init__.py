"""The HTTP API: Flask app factory and the waitress server."""

from .app import create_app
from .server import ApiServer

__all__ = ["ApiServer", "create_app"]
