"""A local server that speaks the Dex wire protocol (dex-local-engine)."""

__version__ = "0.3.0"
