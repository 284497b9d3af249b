"""Bounds on the text an error echoes back, so a huge or hostile input cannot break the reply.

A gRPC status travels in metadata (``grpc-message`` percent-encoded, the rich status base64
encoded), which a peer refuses over about 8 KiB. An error that names a 10 KB Flow ID in full
would therefore never reach the caller; the engine clips what it echoes instead.

Example::

    clip_text("x" * 10_000, 64)  # 'xxx…xxx… (9,941 more bytes)'
"""

from __future__ import annotations

from typing import Literal

__all__ = ["MAX_ERROR_DETAIL_BYTES", "MAX_WORKER_STACK_TRACE_BYTES", "clip_text"]

MAX_ERROR_DETAIL_BYTES = 1024
"""UTF-8 bytes of an error detail the engine sends (its own or a Worker's)."""
MAX_WORKER_STACK_TRACE_BYTES = 2048
"""UTF-8 bytes of a Worker's stack trace the engine passes on (its end: where it failed)."""


def clip_text(text: str, max_bytes: int, keep: Literal["head", "tail"] = "head") -> str:
    """``text`` when it has at most ``max_bytes`` UTF-8 bytes, else its head (or tail) that fits
    with a note of how much was left out.

    A character that cannot be encoded (a lone surrogate) is echoed as ``?``.
    """
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= max_bytes:
        return encoded.decode("utf-8")
    budget = max(max_bytes - 40, 0)
    if keep == "head":
        kept = encoded[:budget].decode("utf-8", errors="ignore")
        return f"{kept}… ({len(encoded) - budget:,} more bytes)"
    kept = encoded[len(encoded) - budget :].decode("utf-8", errors="ignore")
    return f"({len(encoded) - budget:,} earlier bytes) …{kept}"
