"""Session settings: size rule, validation texts, encoding, and the per-turn copy."""

from __future__ import annotations

import json
from collections import OrderedDict
from types import MappingProxyType

import pytest
from dex_agents import (
    INVALID_START_SESSION_SETTINGS_REASON,
    MAX_SESSION_SETTINGS_BYTES,
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    ConfigurationError,
    TurnSessionSettings,
    session_settings_size,
    validate_session_settings,
)
from dex_agents._json_values import (
    WireValueError,
)
from dex_agents._session.settings import (
    decode_session_settings,
    encode_session_settings,
    invalid_start_session_settings_reason,
    session_settings_of_turn,
    session_settings_problem,
)

# Compact JSON of {"k":"<text>"} is the text's UTF-8 bytes plus these.
ENVELOPE_BYTES = len('{"k":""}')


def _settings_of_size(size: int, unit: str = "x") -> dict[str, object]:
    """Settings whose compact JSON is exactly ``size`` bytes, padded with ``unit`` then ASCII."""
    unit_bytes = len(unit.encode("utf-8"))
    text_bytes = size - ENVELOPE_BYTES
    count, rest = divmod(text_bytes, unit_bytes)
    return {"k": unit * count + "x" * rest}


def test_limits_are_the_documented_ones() -> None:
    assert MAX_SESSION_SETTINGS_BYTES == 16 * 1024
    assert SESSION_SETTINGS_SIZE_TOLERANCE_BYTES == 1024


def test_size_is_compact_utf8_json_with_non_ascii_unescaped() -> None:
    assert session_settings_size({}) == 2
    assert session_settings_size({"model": "gpt-5-mini"}) == len('{"model":"gpt-5-mini"}')
    assert session_settings_size({"a": [1, 2], "b": {"c": None}}) == len(
        '{"a":[1,2],"b":{"c":null}}'
    )
    # é is 2 bytes, € 3, 😀 4, and U+2028 3 bytes, not the 6 of an escape.
    assert session_settings_size({"k": "é"}) == ENVELOPE_BYTES + 2
    assert session_settings_size({"k": "€"}) == ENVELOPE_BYTES + 3
    assert session_settings_size({"k": "😀"}) == ENVELOPE_BYTES + 4
    assert session_settings_size({"k": "\u2028\u2029"}) == ENVELOPE_BYTES + 6
    # Escapes JSON needs still count as written.
    assert session_settings_size({"k": '"\n'}) == ENVELOPE_BYTES + 4


@pytest.mark.parametrize("unit", ["x", "é", "€", "😀", "\u2028"])
def test_sixteen_kib_is_allowed_and_one_byte_more_is_not(unit: str) -> None:
    at_limit = _settings_of_size(MAX_SESSION_SETTINGS_BYTES, unit)
    assert session_settings_size(at_limit) == MAX_SESSION_SETTINGS_BYTES
    validate_session_settings(at_limit)
    over = _settings_of_size(MAX_SESSION_SETTINGS_BYTES + 1, unit)
    assert session_settings_size(over) == MAX_SESSION_SETTINGS_BYTES + 1
    with pytest.raises(ConfigurationError) as caught:
        validate_session_settings(over)
    assert str(caught.value) == (
        "session settings are 16385 bytes of compact JSON, above the limit of 16384 bytes"
    )


@pytest.mark.parametrize("unit", ["x", "\u2028"])
def test_the_session_accepts_the_tolerance_and_no_more(unit: str) -> None:
    tolerance = SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
    at_limit = _settings_of_size(MAX_SESSION_SETTINGS_BYTES + tolerance, unit)
    assert session_settings_problem(at_limit) is not None
    assert session_settings_problem(at_limit, tolerance_bytes=tolerance) is None
    validate_session_settings(at_limit, tolerance_bytes=tolerance)
    over = _settings_of_size(MAX_SESSION_SETTINGS_BYTES + tolerance + 1, unit)
    assert session_settings_problem(over, tolerance_bytes=tolerance) == (
        "session settings are 17409 bytes of compact JSON, above the limit of 17408 bytes "
        "(16384 plus a tolerance of 1024)"
    )


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (None, "session settings must be a JSON object, got null"),
        (["gpt-5"], "session settings must be a JSON object, got list"),
        ('{"model": "gpt-5"}', "session settings must be a JSON object, got str"),
        (42, "session settings must be a JSON object, got int"),
        (
            {"seen": {1, 2}},
            "session settings are not JSON-serializable: settings['seen'] is of type set",
        ),
        (
            {"a": [1, object()]},
            "session settings are not JSON-serializable: settings['a'][1] is of type object",
        ),
        (
            {"a": {1: "one"}},
            "session settings are not JSON-serializable: settings['a'] has a key that is not "
            "a string: 1",
        ),
        (
            {"t": float("nan")},
            "session settings are not JSON-serializable: settings['t'] is nan, which JSON "
            "cannot represent",
        ),
        (
            {"t": float("inf")},
            "session settings are not JSON-serializable: settings['t'] is inf, which JSON "
            "cannot represent",
        ),
        (
            {"b": b"bytes"},
            "session settings are not JSON-serializable: settings['b'] is of type bytes",
        ),
    ],
)
def test_invalid_settings_name_the_problem(settings: object, problem: str) -> None:
    assert session_settings_problem(settings) == problem
    with pytest.raises(ConfigurationError) as caught:
        validate_session_settings(settings)
    assert str(caught.value) == problem


def test_a_settings_object_that_contains_itself_is_refused() -> None:
    looping: dict[str, object] = {}
    looping["self"] = looping
    assert session_settings_problem(looping) == (
        "session settings are not JSON-serializable: settings['self'] contains itself"
    )
    shared = [1]
    # The same list twice is no cycle.
    assert session_settings_problem({"a": shared, "b": shared}) is None


def test_any_mapping_and_tuples_are_json() -> None:
    settings = MappingProxyType({"models": ("a", "b"), "nested": OrderedDict(x=1.5)})
    validate_session_settings(settings)
    assert encode_session_settings(settings) == '{"models":["a","b"],"nested":{"x":1.5}}'


def test_invalid_start_reason_starts_with_the_constant() -> None:
    problem = session_settings_problem(["x"])
    assert problem is not None
    reason = invalid_start_session_settings_reason(problem)
    assert reason.startswith(INVALID_START_SESSION_SETTINGS_REASON)
    assert reason == f"{INVALID_START_SESSION_SETTINGS_REASON}: {problem}"


def test_encode_and_decode_round_trip() -> None:
    settings = {"model": "gpt-5", "label": "Zürich\u2028", "limits": {"tokens": 1000}}
    text = encode_session_settings(settings)
    assert text == '{"label":"Zürich\u2028","limits":{"tokens":1000},"model":"gpt-5"}'
    assert decode_session_settings(text) == settings
    assert len(text.encode("utf-8")) == session_settings_size(settings)


def test_decode_reads_missing_settings_as_empty_and_refuses_other_json() -> None:
    assert decode_session_settings(None) == {}
    assert decode_session_settings("") == {}
    assert decode_session_settings("{}") == {}
    with pytest.raises(WireValueError, match="must be a JSON object, got list"):
        decode_session_settings("[1]")
    with pytest.raises(WireValueError, match="not valid JSON text"):
        decode_session_settings("{model")


def test_encode_refuses_invalid_settings() -> None:
    with pytest.raises(ConfigurationError, match="must be a JSON object"):
        encode_session_settings([])  # type: ignore[arg-type]


def test_turn_copy_reads_only_for_its_own_turn() -> None:
    copy = TurnSessionSettings.copy_for_turn("turn-2", {"model": "gpt-5"})
    assert copy.for_turn("turn-2") == {"model": "gpt-5"}
    assert copy.for_turn("turn-3") == {}
    assert copy.for_turn("turn-1") == {}


def test_turn_copy_is_detached_from_the_caller() -> None:
    settings: dict[str, object] = {"model": "gpt-5", "tags": ["a"]}
    copy = TurnSessionSettings.copy_for_turn("turn-1", settings)
    settings["model"] = "gpt-4"
    tags = settings["tags"]
    assert isinstance(tags, list)
    tags.append("b")
    assert copy.for_turn("turn-1") == {"model": "gpt-5", "tags": ["a"]}


def test_turn_copy_refuses_bad_input() -> None:
    with pytest.raises(ConfigurationError, match="need a turn ID"):
        TurnSessionSettings.copy_for_turn(" ", {})
    with pytest.raises(ConfigurationError, match="must be a JSON object"):
        TurnSessionSettings.copy_for_turn("turn-1", None)  # type: ignore[arg-type]


def test_turn_copy_travels_as_json_text() -> None:
    copy = TurnSessionSettings.copy_for_turn("turn-4", {"model": "gpt-5", "n": 2})
    text = copy.to_json_text()
    assert json.loads(text) == {"turn_id": "turn-4", "session_settings": {"model": "gpt-5", "n": 2}}
    assert TurnSessionSettings.from_json_text(text) == copy
    assert session_settings_of_turn(text, "turn-4") == {"model": "gpt-5", "n": 2}
    assert session_settings_of_turn(copy, "turn-4") == {"model": "gpt-5", "n": 2}


def test_no_copy_or_an_earlier_turns_copy_reads_as_no_settings() -> None:
    earlier = TurnSessionSettings.copy_for_turn("turn-1", {"model": "gpt-5"}).to_json_text()
    assert session_settings_of_turn(earlier, "turn-2") == {}
    assert session_settings_of_turn(None, "turn-2") == {}
    assert session_settings_of_turn("", "turn-2") == {}
    with pytest.raises(WireValueError):
        session_settings_of_turn('{"session_settings": {}}', "turn-2")
