"""The names MCP tools get in an agent: ``<server>__<tool>``, sanitised and at most 64 long."""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["MAX_TOOL_NAME_LENGTH", "agent_tool_name"]

MAX_TOOL_NAME_LENGTH: Final = 64
"""The longest tool name every provider accepts."""
_SEPARATOR: Final = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH: Final = 8


def agent_tool_name(server_name: str, tool_name: str) -> str:
    """The name a server's tool is offered under.

    Characters other than letters, digits, ``_`` and ``-`` become ``_``; a name over 64 characters
    keeps its first 55 and ends with ``_`` and 8 hex digits of the SHA-256 of the full name, so
    two long names that share a prefix stay apart.

    Example:
        >>> agent_tool_name("files", "read.file")
        'files__read_file'
        >>> len(agent_tool_name("files", "x" * 100))
        64
    """
    name = _UNSAFE.sub("_", f"{server_name}{_SEPARATOR}{tool_name}")
    if len(name) <= MAX_TOOL_NAME_LENGTH:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:_HASH_LENGTH]
    return f"{name[: MAX_TOOL_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"
