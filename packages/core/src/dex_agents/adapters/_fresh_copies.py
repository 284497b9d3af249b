"""``fresh_copier``: a function that makes a decoded framework object anew, planned once.

A runner that keeps decoded stored items (``KeptDecodes``) hands every caller its own copy, since a
framework may edit the history it is given in place. Walking every field of every object on every
copy costs as much again as the copy itself; a kept object never changes, so which of its fields
hold something to copy is decided once, when the item is decoded, and each copy then copies a
``__dict__`` or a list in one call and visits only those fields.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

__all__ = ["fresh_copier"]

_ValueT = TypeVar("_ValueT")

_SHARED_TYPES: Final = frozenset({str, bytes, int, float, bool, type(None), datetime.datetime})
"""Immutable leaves: shared between the kept object and its copies."""
_set_attribute: Final = object.__setattr__


def fresh_copier(value: _ValueT) -> Callable[[], _ValueT]:
    """A function that makes ``value`` anew: its own copy of every list, dict, dataclass and
    pydantic model in it; strings, numbers, ``None`` and datetimes shared.

    The plan follows ``value`` as it is now, so ``value`` must not change afterwards (a kept
    decoded item, never handed out). Objects of any other type are deep-copied on every call.

    Example:
        >>> kept = {"role": "user", "parts": [{"text": "hi"}]}
        >>> make = fresh_copier(kept)
        >>> fresh = make()
        >>> fresh["parts"][0]["text"] = "edited"
        >>> make()
        {'role': 'user', 'parts': [{'text': 'hi'}]}
    """
    return _copier(value)


def _copier(value: Any) -> Callable[[], Any]:
    kind: type = type(value)
    if kind is list:
        items = _planned(enumerate(value))
        return functools.partial(_copy_list, value, items) if items else value.copy
    if kind is dict:
        entries = _planned(value.items())
        return functools.partial(_copy_dict, value, entries) if entries else value.copy
    if _is_plain_dataclass(kind):
        return functools.partial(
            _copy_dataclass, kind, value.__dict__, _planned(value.__dict__.items())
        )
    if _is_pydantic_model(kind):
        extra: dict[str, Any] | None = value.__pydantic_extra__
        fields = _planned(value.__dict__.items())
        extras = _planned(extra.items()) if extra else []
        if _has_base_model_copy(kind) and getattr(value, "__pydantic_private__", None) is None:
            return functools.partial(
                _copy_plain_model,
                kind,
                value.__dict__,
                value.__pydantic_fields_set__,
                extra,
                fields,
                extras,
            )
        return functools.partial(_copy_model, value, fields, extras)
    return functools.partial(copy.deepcopy, value)


_Plan = list[tuple[Any, Callable[[], Any]]]
"""Where a copy differs from a shallow copy: (index, key or field name, what makes its value)."""


def _planned(entries: Iterable[tuple[Any, Any]]) -> _Plan:
    return [(key, _copier(item)) for key, item in entries if type(item) not in _SHARED_TYPES]


def _copy_list(value: list[Any], items: _Plan) -> list[Any]:
    fresh = value.copy()
    for index, make in items:
        fresh[index] = make()
    return fresh


def _copy_dict(value: dict[Any, Any], entries: _Plan) -> dict[Any, Any]:
    fresh = value.copy()
    for key, make in entries:
        fresh[key] = make()
    return fresh


def _copy_dataclass(kind: type, state: dict[str, Any], fields: _Plan) -> Any:
    fresh: Any = object.__new__(kind)
    fresh_state = fresh.__dict__
    fresh_state.update(state)
    for name, make in fields:
        fresh_state[name] = make()
    return fresh


def _copy_plain_model(
    kind: type,
    state: dict[str, Any],
    fields_set: set[str],
    extra: dict[str, Any] | None,
    fields: _Plan,
    extras: _Plan,
) -> Any:
    # What pydantic's BaseModel.__copy__ does for a model without private attributes, with the
    # state read once at planning: about half its cost (it reaches each part through copy.copy).
    fresh: Any = object.__new__(kind)
    fresh_state = state.copy()
    for name, make in fields:
        fresh_state[name] = make()
    fresh_extra = None
    if extra is not None:
        fresh_extra = extra.copy()
        for name, make in extras:
            fresh_extra[name] = make()
    _set_attribute(fresh, "__dict__", fresh_state)
    _set_attribute(fresh, "__pydantic_extra__", fresh_extra)
    _set_attribute(fresh, "__pydantic_fields_set__", fields_set.copy())
    _set_attribute(fresh, "__pydantic_private__", None)
    return fresh


def _copy_model(value: Any, fields: _Plan, extra: _Plan) -> Any:
    # pydantic's own shallow copy (``__dict__``, extra, fields set, private), then our copies of
    # the fields that hold lists, dicts or objects.
    fresh = value.__copy__()
    fresh_state = fresh.__dict__
    for name, make in fields:
        fresh_state[name] = make()
    for name, make in extra:
        fresh.__pydantic_extra__[name] = make()
    return fresh


@functools.cache
def _is_plain_dataclass(kind: type) -> bool:
    """Whether ``kind`` is a dataclass whose instances keep all their state in ``__dict__``."""
    slots = [base.__dict__["__slots__"] for base in kind.__mro__ if "__slots__" in base.__dict__]
    return dataclasses.is_dataclass(kind) and kind.__dictoffset__ != 0 and not any(slots)


@functools.cache
def _has_base_model_copy(kind: type) -> bool:
    """Whether ``kind`` copies itself with pydantic's own ``BaseModel.__copy__`` (not, say,
    ``RootModel``'s or a model's own), and makes its instances with ``object.__new__``."""
    copies = next(base for base in kind.__mro__ if "__copy__" in base.__dict__)
    makes = next(base for base in kind.__mro__ if "__new__" in base.__dict__)
    return (
        copies.__module__ == "pydantic.main" and copies.__name__ == "BaseModel" and makes is object
    )


@functools.cache
def _is_pydantic_model(kind: type) -> bool:
    """Whether ``kind`` is a pydantic v2 model (its ``__copy__`` copies fields set and extras);
    looked up by its attributes, so the core needs no pydantic."""
    return (
        hasattr(kind, "__pydantic_fields__")
        and hasattr(kind, "model_copy")
        and "__copy__" in dir(kind)
        and kind.__dictoffset__ != 0
    )
