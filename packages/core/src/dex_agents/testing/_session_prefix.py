"""Session-ID prefixes: how tests that share an engine and a Worker keep apart.

Each test of a shared stack starts its sessions under a prefix of its own (``t<12 hex>-``), so
a search, a gate or an invocation log can tell which test a session belongs to without a
process of its own.
"""

from __future__ import annotations

import re
import uuid

__all__ = ["new_session_prefix", "session_prefix_of"]

_PREFIX = re.compile(r"^(t[0-9a-f]{12}-)")


def new_session_prefix() -> str:
    """A new, unique session-ID prefix, such as ``t3f9a2b1c0d4e-``.

    Example:
        >>> prefix = new_session_prefix()
        >>> session_prefix_of(prefix + "chat") == prefix
        True
    """
    return f"t{uuid.uuid4().hex[:12]}-"


def session_prefix_of(session_id: str) -> str | None:
    """The prefix ``new_session_prefix`` gave ``session_id``, or ``None`` when it has none.

    Example:
        >>> session_prefix_of("chat") is None
        True
    """
    match = _PREFIX.match(session_id)
    return match.group(1) if match else None
