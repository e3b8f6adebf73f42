"""Tuneboard's client: `Client` for Python scripts, `tuneboard` on the command line."""

from tuneboard_client.api import Client, TuneboardAPIError

__all__ = ["Client", "TuneboardAPIError"]
__version__ = "0.1.0"
