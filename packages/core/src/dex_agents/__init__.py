"""Durable AI agent sessions on the Dex workflow engine."""

__version__ = "0.3.0"
