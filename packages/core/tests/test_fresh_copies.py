"""fresh_copier: every copy its own lists, dicts, dataclasses and models; immutable leaves shared."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from dex_agents.adapters import KeptDecodes, fresh_copier


@dataclass
class _Part:
    name: str
    args: dict[str, Any]
    stamp: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))


@dataclass
class _Message:
    parts: list[_Part]
    metadata: dict[str, Any] | None = None
    run_id: str | None = None


@dataclass(slots=True)
class _Slotted:
    values: list[int]


def _walk(value: object) -> list[object]:
    """Every list, dict and dataclass in ``value``, ``value`` first."""
    found: list[object] = []
    if isinstance(value, list):
        found.append(value)
        for item in value:
            found.extend(_walk(item))
    elif isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_walk(item))
    elif hasattr(value, "__dataclass_fields__"):
        found.append(value)
        for name in value.__dataclass_fields__:
            found.extend(_walk(getattr(value, name)))
    return found


def _kept_message() -> _Message:
    return _Message(
        parts=[_Part("lookup", {"order": {"id": "7", "lines": [1, 2]}}), _Part("note", {})],
        metadata={"fragment": {"index": 0, "count": 2}},
    )


def test_a_copy_equals_the_original_and_shares_none_of_its_containers() -> None:
    kept = _kept_message()
    make = fresh_copier(kept)
    fresh = make()
    assert fresh == kept
    originals = {id(value) for value in _walk(kept)}
    copies = _walk(fresh)
    assert len(copies) == len(originals) == 10
    assert not any(id(value) in originals for value in copies)
    # Immutable leaves are shared, not copied.
    assert fresh.parts[0].stamp is kept.parts[0].stamp
    assert fresh.parts[0].name is kept.parts[0].name


def test_edits_in_place_reach_neither_the_kept_object_nor_later_copies() -> None:
    kept = _kept_message()
    before = repr(kept)
    make = fresh_copier(kept)
    first = make()
    first.run_id = "run-1"
    first.parts.append(_Part("added", {}))
    first.parts[0].args["order"]["lines"].append(3)
    assert first.metadata is not None
    first.metadata["fragment"]["index"] = 1
    second = make()
    assert repr(kept) == before
    assert repr(second) == before


def test_other_objects_are_deep_copied_on_every_call() -> None:
    slotted, pair = _Slotted([1, 2]), (1, [2])
    fresh_slotted, fresh_pair = fresh_copier((slotted, pair))()
    assert (fresh_slotted, fresh_pair) == (slotted, pair)
    assert fresh_slotted is not slotted and fresh_slotted.values is not slotted.values
    assert fresh_pair[1] is not pair[1]


def test_a_pydantic_model_keeps_its_fields_set_and_extras_and_copies_their_containers() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Message(pydantic.BaseModel):  # type: ignore[name-defined, misc]
        model_config = pydantic.ConfigDict(extra="allow")
        content: str
        tool_calls: list[dict[str, Any]]
        name: str | None = None

    kept = Message(content="hi", tool_calls=[{"id": "c1", "args": {"n": 1}}], labels=["a"])
    make = fresh_copier(kept)
    fresh = make()
    assert fresh == kept and type(fresh) is Message
    assert fresh.model_fields_set == {"content", "tool_calls", "labels"}
    fresh.tool_calls[0]["args"]["n"] = 2
    fresh.labels.append("b")
    fresh.name = "edited"
    again = make()
    assert again.tool_calls == [{"id": "c1", "args": {"n": 1}}]
    assert again.labels == ["a"]
    assert again.name is None
    assert kept.model_fields_set == again.model_fields_set == {"content", "tool_calls", "labels"}
    assert again.model_extra == {"labels": ["a"]} and again.model_extra is not kept.model_extra


def test_a_pydantic_model_with_private_attributes_or_its_own_copy_is_copied_its_way() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Tracked(pydantic.BaseModel):  # type: ignore[name-defined, misc]
        content: str
        _seen: list[int] = pydantic.PrivateAttr(default_factory=list)

    class Lines(pydantic.RootModel[list[dict[str, int]]]):  # type: ignore[name-defined, misc]
        pass

    tracked = Tracked(content="hi")
    tracked._seen.append(1)
    fresh = fresh_copier(tracked)()
    assert fresh == tracked and fresh._seen == [1]
    lines = Lines([{"n": 1}])
    make = fresh_copier(lines)
    edited = make()
    edited.root[0]["n"] = 2
    edited.root.append({"n": 3})
    assert make() == lines == Lines([{"n": 1}])


def test_kept_decodes_without_a_copy_function_hands_out_planned_copies() -> None:
    decoded: list[str] = []

    def decode(item: str) -> dict[str, Any]:
        decoded.append(item)
        value: dict[str, Any] = json.loads(item)
        return value

    kept = KeptDecodes(decode)
    item = '{"parts": [{"args": {"n": 1}}]}'
    first = kept(item)
    first["parts"][0]["args"]["n"] = 2
    assert kept(item) == {"parts": [{"args": {"n": 1}}]}
    assert decoded == [item]
