"""KeptDecodes: each stored item decoded once per process, every caller its own copy."""

from __future__ import annotations

import json

import pytest
from dex_agents.adapters import KeptDecodes


class _CountingDecode:
    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, item: str) -> dict[str, object]:
        self.items.append(item)
        value = json.loads(item)
        if not isinstance(value, dict):
            raise ValueError(f"{item!r} is not an object")
        return value


def _copied(value: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(value))


def test_an_item_is_decoded_once_and_each_caller_edits_its_own_copy() -> None:
    decode = _CountingDecode()
    kept = KeptDecodes(decode, _copied)
    first = kept('{"parts": ["a"]}')
    first["parts"].append("edited")  # type: ignore[attr-defined]
    second = kept('{"parts": ["a"]}')
    assert second == {"parts": ["a"]}
    assert second is not first
    assert decode.items == ['{"parts": ["a"]}']


def test_a_failing_item_raises_every_time_and_is_not_kept() -> None:
    decode = _CountingDecode()
    kept = KeptDecodes(decode, _copied)
    for _ in range(2):
        with pytest.raises(ValueError, match="is not an object"):
            kept("[1]")
    assert decode.items == ["[1]", "[1]"]


def test_long_items_are_decoded_every_time_and_the_least_recent_is_dropped() -> None:
    decode = _CountingDecode()
    kept = KeptDecodes(decode, _copied, max_items=2, max_item_chars=20)
    long_item = json.dumps({"text": "x" * 30})
    kept(long_item)
    kept(long_item)
    for item in ('{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 3}', '{"n": 1}'):
        kept(item)
    assert decode.items == [long_item, long_item, '{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 1}']
    kept.clear()
    kept('{"n": 3}')
    assert decode.items[-1] == '{"n": 3}' and len(decode.items) == 7
