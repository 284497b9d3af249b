"""Reading a StrEnum member from a caller's value, with an error that lists what is allowed."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from dex_agents.exceptions import ConfigurationError

__all__ = ["enum_member"]

EnumT = TypeVar("EnumT", bound=Enum)


def enum_member(enum_type: type[EnumT], value: object, what: str) -> EnumT:
    """Return ``value`` as a member of ``enum_type``: the member itself, or its value.

    Raises:
        ConfigurationError: When ``value`` is neither; the message names ``what`` and lists the
            allowed values.

    Example:
        >>> from dex_agents import InteractionMode
        >>> enum_member(InteractionMode, "planning", "interaction_mode")
        <InteractionMode.PLANNING: 'planning'>
        >>> enum_member(InteractionMode, "brainstorming", "interaction_mode")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationError: interaction_mode must be one of chat, planning, executing, got 'brainstorming'
    """
    if isinstance(value, enum_type):
        return value
    for member in enum_type:
        if member.value == value:
            return member
    known = ", ".join(str(member.value) for member in enum_type)
    raise ConfigurationError(f"{what} must be one of {known}, got {value!r}")
