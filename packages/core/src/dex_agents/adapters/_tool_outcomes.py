"""The error policy every runner applies to a tool call that cannot run as asked.

One outcome per situation, whichever framework the runner wraps (see "Writing an adapter"):

- a tool name the agent does not have: ``failed`` at once, ``unknown tool <name>``;
- arguments that are not a JSON object or break the tool's schema: ``failed`` at once,
  ``invalid arguments for <name>: <problem>``;
- a tool that raises ``ToolExecutionError``: ``failed`` at once with its text;
- a task no poller on this Worker polls: recorded at once by the tool's effect
  (``ToolTaskPollerMissingError``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from dex_agents._tool_policy import ResolvedToolPolicy, ToolEffect
from dex_agents.exceptions import ToolExecutionError
from dex_agents.stepwise._json_schema import ArgumentValidationError
from dex_agents.stepwise._json_schema_validation import validate_against_schema

__all__ = [
    "UNKNOWN_TOOL_POLICY",
    "check_tool_arguments",
    "checked_tool_call",
    "invalid_arguments_error",
    "tool_arguments_object",
    "unknown_tool_error",
]

ToolT = TypeVar("ToolT")

UNKNOWN_TOOL_POLICY: Final = ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
"""The policy of a call of a tool the agent does not have: it fails at once in its tool Step
without reaching any tool, so there is nothing to approve."""


def unknown_tool_error(tool_name: str) -> ToolExecutionError:
    """The error to raise for a call of a tool the agent does not have.

    Example:
        >>> str(unknown_tool_error("refund"))
        'unknown tool refund'
    """
    return ToolExecutionError(f"unknown tool {tool_name}")


def invalid_arguments_error(tool_name: str, problem: str) -> ToolExecutionError:
    """The error to raise for arguments that break the tool's schema; the model sees ``problem``.

    Example:
        >>> str(invalid_arguments_error("refund", "amount must be a number"))
        'invalid arguments for refund: amount must be a number'
    """
    return ToolExecutionError(f"invalid arguments for {tool_name}: {problem}")


def tool_arguments_object(
    tool_name: str, arguments: str | Mapping[str, object]
) -> dict[str, object]:
    """A call's arguments as a dict, from the JSON text or mapping the model sent.

    Raises:
        ToolExecutionError: ``invalid arguments for <tool>: ...`` when the text is not JSON or the
            value is not an object.

    Example:
        >>> tool_arguments_object("refund", '{"amount": 5}')
        {'amount': 5}
    """
    value: object = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise invalid_arguments_error(tool_name, "arguments are not valid JSON") from None
    if not isinstance(value, Mapping):
        raise invalid_arguments_error(tool_name, "arguments must be an object")
    return dict(value)


def check_tool_arguments(
    tool_name: str, arguments: Mapping[str, object], json_schema: Mapping[str, object] | None
) -> None:
    """Checks a call's arguments against the tool's JSON Schema before the tool runs, for a
    framework that hands them to the tool unchecked.

    Checks the common keywords (``type``, ``required``, ``properties``, ``enum``, ...); ``None``
    checks nothing.

    Raises:
        ToolExecutionError: ``invalid arguments for <tool>: <the first problem>``.

    Example:
        >>> schema = {"type": "object", "properties": {"gate": {"type": "string"}}}
        >>> check_tool_arguments("lookup", {"gate": 5}, schema)
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ToolExecutionError: invalid arguments for lookup: argument gate must be of type string, got integer
    """
    if json_schema is None:
        return
    try:
        validate_against_schema(dict(arguments), json_schema)
    except ArgumentValidationError as error:
        raise invalid_arguments_error(tool_name, str(error)) from None


def checked_tool_call(
    tools: Mapping[str, ToolT],
    tool_name: str,
    arguments: str | Mapping[str, object],
    json_schema: Callable[[ToolT], Mapping[str, object] | None] | None = None,
) -> tuple[ToolT, dict[str, object]]:
    """The tool a call names and the call's arguments as a dict, checked in the order every
    runner checks them before the tool runs: the tool name, the JSON object, the tool's schema.

    Args:
        tools: The agent's tools by name.
        tool_name: The tool name the model called.
        arguments: The arguments the model sent, JSON text or a mapping.
        json_schema: The JSON Schema of a tool's arguments (``None``: unchecked), for a framework
            that hands the arguments to the tool unchecked; omitted, nothing is checked.

    Raises:
        ToolExecutionError: ``unknown tool <name>`` (:func:`unknown_tool_error`), or
            ``invalid arguments for <name>: ...`` (:func:`tool_arguments_object`,
            :func:`check_tool_arguments`).

    Example:
        >>> schema = {"type": "object", "required": ["gate"]}
        >>> checked_tool_call({"lookup": "the tool"}, "lookup", '{"gate": "a"}', lambda _: schema)
        ('the tool', {'gate': 'a'})
        >>> checked_tool_call({"lookup": "the tool"}, "refund", "{}")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ToolExecutionError: unknown tool refund
    """
    tool = tools.get(tool_name)
    if tool is None:
        raise unknown_tool_error(tool_name)
    checked = tool_arguments_object(tool_name, arguments)
    if json_schema is not None:
        check_tool_arguments(tool_name, checked, json_schema(tool))
    return tool, checked
