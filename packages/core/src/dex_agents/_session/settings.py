"""Session settings: one JSON object per session, such as ``{"model": "gpt-5-mini"}``.

The application sets the settings when it starts a session and can replace them later; nothing is
merged. The Step that starts a turn copies them into ``TurnSessionSettings`` tagged with the turn
(:class:`TurnSessionSettings`), and the turn's model calls read only that copy, so a running turn
keeps the settings it started with. A copy an earlier turn left reads as no settings.

Depth rule: objects and arrays nest at most :data:`MAX_SESSION_SETTINGS_DEPTH` levels.

Size rule: the compact JSON text, UTF-8 with non-ASCII unescaped, is at most
:data:`MAX_SESSION_SETTINGS_BYTES`. Cores write some floats and U+2028/U+2029 differently, so the
session's own checks accept :data:`SESSION_SETTINGS_SIZE_TOLERANCE_BYTES` more
(``validate_session_settings(settings, tolerance_bytes=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES)``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NoReturn

from dex_agents._json_values import (
    JsonObject,
    JsonValue,
    WireValue,
    WireValueError,
    dump_json_text,
    resolve_wire_value_annotations,
)
from dex_agents._text_validity import unencodable_text_problem
from dex_agents.exceptions import ConfigurationError

__all__ = [
    "INVALID_START_SESSION_SETTINGS_REASON",
    "MAX_SESSION_SETTINGS_BYTES",
    "MAX_SESSION_SETTINGS_DEPTH",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "TurnSessionSettings",
    "decode_session_settings",
    "encode_session_settings",
    "invalid_start_session_settings_reason",
    "session_settings_of_turn",
    "session_settings_problem",
    "session_settings_size",
    "validate_session_settings",
]

MAX_SESSION_SETTINGS_BYTES: Final = 16 * 1024
"""Largest compact JSON text of session settings, in UTF-8 bytes (16 KiB)."""
SESSION_SETTINGS_SIZE_TOLERANCE_BYTES: Final = 1024
"""Extra bytes the session's own checks accept, for JSON the cores write differently (1 KiB)."""
MAX_SESSION_SETTINGS_DEPTH: Final = 64
"""Deepest nesting of objects and arrays in session settings (the settings object is depth 1)."""
INVALID_START_SESSION_SETTINGS_REASON: Final = "invalid start session settings"
"""Start of the reason with which ``StartAgentSession`` fails a session for its settings."""

_EMPTY_SETTINGS: Final[Mapping[str, object]] = MappingProxyType({})


def session_settings_size(settings: Mapping[str, object]) -> int:
    """Return the size of ``settings`` as compact JSON text, UTF-8 with non-ASCII unescaped.

    Raises:
        ConfigurationError: When ``settings`` is not a JSON object or holds something JSON cannot write;
            the message names the place.

    Example:
        >>> session_settings_size({"model": "gpt-5-mini"})
        22
        >>> session_settings_size({"name": "é"})
        13
    """
    return _settings_size(settings)


def session_settings_problem(settings: object, *, tolerance_bytes: int = 0) -> str | None:
    """Return what makes ``settings`` invalid, or ``None`` when they are valid.

    Valid settings are a JSON object (a mapping with string keys, holding only JSON values) whose
    :func:`session_settings_size` is at most :data:`MAX_SESSION_SETTINGS_BYTES` plus
    ``tolerance_bytes``.

    Example:
        >>> session_settings_problem(["gpt-5"])
        'session settings must be a JSON object, got list'
    """
    try:
        size = _settings_size(settings)
    except ValueError as error:
        return str(error)
    limit = MAX_SESSION_SETTINGS_BYTES + tolerance_bytes
    if size > limit:
        allowance = f" ({MAX_SESSION_SETTINGS_BYTES} plus a tolerance of {tolerance_bytes})"
        return (
            f"session settings are {size} bytes of compact JSON, above the limit of {limit} bytes"
            + (allowance if tolerance_bytes else "")
        )
    return None


def validate_session_settings(settings: object, *, tolerance_bytes: int = 0) -> None:
    """Check ``settings`` before they are sent or stored.

    ``AgentSessionClient`` checks with no tolerance before it sends; the session's own checks pass
    ``tolerance_bytes=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES``.

    Raises:
        ConfigurationError: Naming the problem: not a JSON object, not JSON-serializable (with the place),
            or too large (with the size and the limit).

    Example:
        >>> validate_session_settings({"model": "gpt-5"})
        >>> validate_session_settings({"prompt": "x" * 20000})
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationError: session settings are 20013 bytes of compact JSON, above the limit of 16384 bytes
    """
    problem = session_settings_problem(settings, tolerance_bytes=tolerance_bytes)
    if problem is not None:
        raise ConfigurationError(problem)


def invalid_start_session_settings_reason(problem: str) -> str:
    """Return the reason ``StartAgentSession`` fails a session with, for a settings problem.

    Example:
        >>> invalid_start_session_settings_reason("session settings must be a JSON object, got list")
        'invalid start session settings: session settings must be a JSON object, got list'
    """
    return f"{INVALID_START_SESSION_SETTINGS_REASON}: {problem}"


def encode_session_settings(settings: Mapping[str, object]) -> str:
    """Return ``settings`` as the compact JSON text the settings Attributes store (sorted keys).

    Raises:
        ConfigurationError: When ``settings`` is not a JSON object or holds something JSON cannot write.

    Example:
        >>> encode_session_settings({"model": "gpt-5", "effort": "low"})
        '{"effort":"low","model":"gpt-5"}'
    """
    return dump_json_text(_plain_settings(settings))


def decode_session_settings(text: str | None) -> Mapping[str, object]:
    """Return the settings stored as ``text``; ``None`` or empty text (never set) reads as ``{}``.

    Raises:
        WireValueError: When ``text`` is not JSON text of an object.

    Example:
        >>> decode_session_settings('{"model":"gpt-5"}')
        {'model': 'gpt-5'}
        >>> decode_session_settings(None)
        {}
    """
    if not text:
        return {}
    try:
        decoded = json.loads(text)
    except ValueError:
        raise WireValueError("stored session settings are not valid JSON text") from None
    if not isinstance(decoded, dict):
        raise WireValueError(
            f"stored session settings must be a JSON object, got {type(decoded).__name__}"
        )
    return decoded


@dataclass(frozen=True)
class TurnSessionSettings(WireValue):
    """The ``TurnSessionSettings`` value: one turn's copy of the session settings.

    The Step that starts a turn writes it; the turn's model calls, retries, and compaction read
    it with :meth:`for_turn`, which returns no settings for a copy another turn left.

    Attributes:
        turn_id: The turn the copy belongs to, ``turn-<n>``.
        session_settings: The settings the turn started with.

    Example:
        >>> copy = TurnSessionSettings.copy_for_turn("turn-2", {"model": "gpt-5"})
        >>> dict(copy.for_turn("turn-2")), dict(copy.for_turn("turn-3"))
        ({'model': 'gpt-5'}, {})
    """

    turn_id: str
    session_settings: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def copy_for_turn(cls, turn_id: str, settings: Mapping[str, object]) -> TurnSessionSettings:
        """Return a copy of ``settings`` tagged with ``turn_id``, detached from the caller's object.

        Raises:
            ConfigurationError: When ``turn_id`` is blank, or ``settings`` is not a JSON object or holds
                something JSON cannot write.
        """
        if not isinstance(turn_id, str) or not turn_id.strip():
            raise ConfigurationError(f"turn session settings need a turn ID, got {turn_id!r}")
        return cls(turn_id=turn_id, session_settings=_plain_settings(settings))

    def for_turn(self, turn_id: str) -> Mapping[str, object]:
        """Return the settings when this copy belongs to ``turn_id``, else empty settings."""
        if self.turn_id != turn_id:
            return _EMPTY_SETTINGS
        return self.session_settings


def session_settings_of_turn(
    stored: TurnSessionSettings | str | None, turn_id: str
) -> Mapping[str, object]:
    """Return the settings ``turn_id`` runs with, from the stored ``TurnSessionSettings``.

    ``stored`` is the value or its JSON text. No copy, or a copy an earlier turn left, reads as
    no settings (an empty mapping).

    Raises:
        WireValueError: When ``stored`` text is not a ``TurnSessionSettings`` value.

    Example:
        >>> text = TurnSessionSettings.copy_for_turn("turn-1", {"model": "gpt-5"}).to_json_text()
        >>> dict(session_settings_of_turn(text, "turn-1")), dict(session_settings_of_turn(text, "turn-2"))
        ({'model': 'gpt-5'}, {})
    """
    if stored is None or stored == "":
        return _EMPTY_SETTINGS
    if isinstance(stored, str):
        stored = TurnSessionSettings.from_json_text(stored)
    return stored.for_turn(turn_id)


def _settings_size(settings: object) -> int:
    return len(_compact_json(_plain_settings(settings)).encode("utf-8"))


def _compact_json(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _plain_settings(settings: object) -> JsonObject:
    if not isinstance(settings, Mapping):
        kind = "null" if settings is None else type(settings).__name__
        raise ConfigurationError(f"session settings must be a JSON object, got {kind}")
    plain = _plain_json(settings, "settings", set(), 1)
    assert isinstance(plain, dict)
    return plain


def _plain_json(value: object, where: str, open_containers: set[int], depth: int) -> JsonValue:
    """Return ``value`` as plain JSON, refusing anything ``json.dumps`` would change or reject.

    ``depth`` counts the containers ``value`` is in, itself included when it is one; a bound far
    below Python's recursion limit keeps every encoder and decoder of the settings working.
    """
    if isinstance(value, str):
        if unencodable_text_problem(value, "") is not None:
            _not_serializable(f"{where} holds a lone surrogate, which UTF-8 cannot encode")
        return value
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            _not_serializable(f"{where} is {value!r}, which JSON cannot represent")
        return value
    if not isinstance(value, (Mapping, list, tuple)):
        _not_serializable(f"{where} is of type {type(value).__name__}")
    if id(value) in open_containers:
        _not_serializable(f"{where} contains itself")
    if depth > MAX_SESSION_SETTINGS_DEPTH:
        raise ConfigurationError(
            f"session settings are nested more than {MAX_SESSION_SETTINGS_DEPTH} levels deep"
        )
    open_containers.add(id(value))
    try:
        if isinstance(value, Mapping):
            plain: dict[str, JsonValue] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    # json.dumps would turn the key into text silently, so the value would change.
                    _not_serializable(f"{where} has a key that is not a string: {key!r}")
                if unencodable_text_problem(key, "") is not None:
                    _not_serializable(f"{where} has a key with a lone surrogate: {key!a}")
                plain[key] = _plain_json(item, f"{where}[{key!r}]", open_containers, depth + 1)
            return plain
        return [
            _plain_json(item, f"{where}[{index}]", open_containers, depth + 1)
            for index, item in enumerate(value)
        ]
    finally:
        open_containers.discard(id(value))


def _not_serializable(detail: str) -> NoReturn:
    raise ConfigurationError(f"session settings are not JSON-serializable: {detail}")


resolve_wire_value_annotations(__name__)
