"""What counts as text a session can take: not blank, encodable, and, for session IDs, well formed.

Blank means blank to a reader: a message of zero-width spaces, NUL characters or other invisible
characters holds no more than an empty one, so :func:`is_blank_text` removes them before it looks.

Text a session stores must be encodable as UTF-8. Python strings can hold lone surrogates
(``"\\ud800"``, as ``json.loads`` of ``"\\\\ud800"`` yields), which no UTF-8 encoder writes; one
stored value holding one would fail every later read. :func:`unencodable_text_problem` finds them
where text enters from a caller (the RPC refuses it), and :func:`replace_unencodable_text` replaces
each with U+FFFD where text comes from a model or a tool (the session stores the replaced text).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from enum import Enum
from typing import Final, TypeVar, cast

from dex_agents.exceptions import ConfigurationError

__all__ = [
    "MAX_SESSION_ID_BYTES",
    "is_blank_text",
    "replace_unencodable_text",
    "replace_unencodable_values",
    "session_id_problem",
    "unencodable_text_problem",
    "validate_session_id",
]

MAX_SESSION_ID_BYTES: Final = 256
"""Longest session ID, in UTF-8 bytes."""

# Characters that print nothing but are not in a category the loop below drops: fillers and blank
# symbols (Hangul fillers, the Braille blank) and invisible combining marks (the combining grapheme
# joiner, variation selectors).
_INVISIBLE: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f") | frozenset(
    chr(code) for code in (*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0))
)
# Control and format characters (NUL, U+200B..U+200F, U+2060, U+FEFF, ...), separators, and
# unassigned, private-use and surrogate code points show nothing readable on their own.
_INVISIBLE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp"})
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def is_blank_text(text: str) -> bool:
    """Return whether ``text`` shows nothing once invisible characters are removed.

    Whitespace, control characters (NUL included), format characters such as U+200B ZERO WIDTH
    SPACE and U+FEFF, and fillers such as U+3164 count as invisible.

    Example:
        >>> is_blank_text("\\u200b\\x00 \\ufeff"), is_blank_text("hi\\u200b")
        (True, False)
    """
    return all(_is_invisible(character) for character in text)


def _is_invisible(character: str) -> bool:
    return character in _INVISIBLE or unicodedata.category(character) in _INVISIBLE_CATEGORIES


def unencodable_text_problem(text: str, what: str) -> str | None:
    """Return why ``text`` cannot be stored (it holds a lone surrogate), or ``None``.

    Example:
        >>> unencodable_text_problem("a\\ud800", "the message")
        'the message holds the lone surrogate U+D800 at index 1, which UTF-8 cannot encode'
    """
    match = _LONE_SURROGATE.search(text)
    if match is None:
        return None
    return (
        f"{what} holds the lone surrogate U+{ord(match.group()):04X} at index {match.start()}, "
        "which UTF-8 cannot encode"
    )


def replace_unencodable_text(text: str) -> str:
    """Return ``text`` with each lone surrogate replaced by U+FFFD REPLACEMENT CHARACTER.

    Example:
        >>> replace_unencodable_text("ok \\ud83d")
        'ok \\ufffd'
    """
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def session_id_problem(session_id: object) -> str | None:
    """Return why ``session_id`` is not a valid session ID, or ``None`` when it is.

    A session ID is a string of 1 to :data:`MAX_SESSION_ID_BYTES` UTF-8 bytes of printable
    characters (spaces allowed, not only invisible ones), without ``/`` or ``\\``, and not ``.`` or
    ``..``, so it can be a path segment of a URL and gRPC metadata.

    Example:
        >>> session_id_problem("support-42") is None
        True
        >>> session_id_problem("a/b")
        "session ID 'a/b' must not contain '/'"
    """
    if not isinstance(session_id, str):
        return f"session ID must be a string, got {type(session_id).__name__}"
    shown = _shown_id(session_id)
    if not session_id or is_blank_text(session_id):
        return f"session ID {shown} must not be blank"
    if unencodable_text_problem(session_id, "") is not None:
        return f"session ID {shown} holds a lone surrogate, which UTF-8 cannot encode"
    size = len(session_id.encode("utf-8"))
    if size > MAX_SESSION_ID_BYTES:
        return f"session ID {shown} is {size} bytes, over the limit of {MAX_SESSION_ID_BYTES}"
    for character in session_id:
        if character in "/\\":
            return f"session ID {shown} must not contain {character!r}"
        if not character.isprintable() and character != " ":
            return f"session ID {shown} must not contain the character U+{ord(character):04X}"
    if session_id in (".", ".."):
        return f"session ID {shown} must not be '.' or '..'"
    return None


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` when it is a valid session ID (see :func:`session_id_problem`).

    Raises:
        ConfigurationError: Naming what is wrong with the ID (shown shortened when it is long).

    Example:
        >>> validate_session_id("support-42")
        'support-42'
        >>> validate_session_id("a\\nb")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationError: session ID 'a\\nb' must not contain the character U+000A
    """
    problem = session_id_problem(session_id)
    if problem is not None:
        raise ConfigurationError(problem)
    assert isinstance(session_id, str)
    return session_id


def _shown_id(session_id: str) -> str:
    """The ID for an error message: repr, cut to 80 characters so a 10 KB ID stays readable."""
    if len(session_id) <= 80:
        return ascii(session_id) if _LONE_SURROGATE.search(session_id) else repr(session_id)
    return f"{ascii(session_id[:80])[:-1]}...' ({len(session_id)} characters)"


_T = TypeVar("_T")


def replace_unencodable_values(value: _T) -> _T:
    """Return ``value`` with :func:`replace_unencodable_text` applied to every string in it.

    Walks strings, tuples, lists, dicts (keys too) and dataclass instances, and returns ``value``
    itself when nothing changed, so a value without a lone surrogate costs one scan.

    Example:
        >>> replace_unencodable_values({"a": ("x\\udc80", 1)})
        {'a': ('x\\ufffd', 1)}
    """
    return cast("_T", _replaced(value, 0))


def _replaced(value: object, depth: int) -> object:
    if isinstance(value, str):
        return replace_unencodable_text(value)
    if depth > 64 or isinstance(value, (int, float, bool, bytes, type(None), Enum)):
        return value
    if isinstance(value, (tuple, list)):
        items = [_replaced(item, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(_replaced(k, depth + 1), _replaced(v, depth + 1)) for k, v in value.items()]
        if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for item in dataclasses.fields(value):
            if not item.init:
                continue
            old = getattr(value, item.name)
            new = _replaced(old, depth + 1)
            if new is not old:
                changes[item.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
