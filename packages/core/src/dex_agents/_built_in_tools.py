"""Built-in tools: ``ask_user``, ``durable_wait`` and ``write_todos``.

Built-in tools are session features, so they work under every runner: a runner offers the
definitions of the enabled ones (:func:`built_in_tool_definitions`) to its model, and the session
routes their calls to its own Steps, with no approval and the read effect. This module holds the
pure parts: the definitions, the argument rules with their exact failure texts, and the exact
model-visible results. An enabled name is reserved; a disabled one is an ordinary tool name
(:func:`enabled_built_in_tool`).

Arguments arrive as the model wrote them. ``null`` for an optional argument means the argument is
absent, because providers in strict-schema mode send every argument. Unknown arguments are refused,
so a misspelt argument is never silently ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, NoReturn, TypeAlias

from dex_agents._json_values import JsonObject, JsonValue
from dex_agents._text_validity import is_blank_text
from dex_agents._values import (
    AgentTodo,
    QuestionResolution,
    TodoStatus,
)
from dex_agents.exceptions import ConfigurationError, DexAgentsError

__all__ = [
    "BUILT_IN_TOOL_DEFINITIONS",
    "DEFAULT_MAX_DURABLE_WAIT",
    "QUESTION_DEADLINE_PASSED_RESULT",
    "QUESTION_DECLINED_RESULT",
    "WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR",
    "AskUserArguments",
    "BuiltInTool",
    "BuiltInToolArguments",
    "BuiltInToolArgumentsError",
    "BuiltInToolDefinition",
    "DurableWaitArguments",
    "WriteTodosArguments",
    "ask_user_answered_result",
    "ask_user_result",
    "built_in_tool_definitions",
    "durable_wait_result",
    "enabled_built_in_tool",
    "is_allowed_question_answer",
    "max_durable_wait_seconds",
    "parse_ask_user_arguments",
    "parse_built_in_tool_arguments",
    "parse_built_in_tools",
    "parse_durable_wait_arguments",
    "parse_write_todos_arguments",
    "remaining_wait_seconds",
    "repeated_write_todos_call_ids",
]


class BuiltInTool(StrEnum):
    """The built-in tools; enable them in ``AgentSessionOptions.built_in_tools``."""

    ASK_USER = "ask_user"
    DURABLE_WAIT = "durable_wait"
    WRITE_TODOS = "write_todos"


DEFAULT_MAX_DURABLE_WAIT: Final = timedelta(days=365)
"""Longest ``durable_wait`` when ``AgentSessionOptions.max_durable_wait`` does not set one."""
QUESTION_DECLINED_RESULT: Final = "The user declined to answer."
"""Model-visible result of an ``ask_user`` question that ``resolve_interrupt`` declined."""
QUESTION_DEADLINE_PASSED_RESULT: Final = "question deadline passed"
"""Model-visible result of an ``ask_user`` question whose ``interrupt_deadline`` passed."""
WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR: Final = (
    "write_todos was called more than once in one response"
)
"""Error of every ``write_todos`` call of a model response that holds more than one."""

_TODO_STATUSES: Final = {status.value: status for status in TodoStatus}
_TODO_STATUS_NAMES: Final = ", ".join(_TODO_STATUSES)


@dataclass(frozen=True)
class BuiltInToolDefinition:
    """What a runner offers its model for one built-in tool.

    ``parameters`` is a JSON Schema that strict-schema modes accept: every property is required,
    optional ones are nullable, and no object allows additional properties. Treat it as read-only;
    :func:`built_in_tool_definitions` returns copies a caller may change.

    Example:
        >>> definition = built_in_tool_definitions({"durable_wait"})[0]
        >>> definition.name, definition.parameters["required"]
        (<BuiltInTool.DURABLE_WAIT: 'durable_wait'>, ['duration_seconds', 'reason'])
    """

    name: BuiltInTool
    description: str
    parameters: JsonObject = field(hash=False)

    def to_json(self) -> JsonObject:
        """Return ``{"name", "description", "parameters"}``, the usual function-tool shape."""
        return {
            "name": self.name.value,
            "description": self.description,
            "parameters": _copy_json(self.parameters),
        }


def _nullable(json_type: str) -> list[JsonValue]:
    return [json_type, "null"]


def _strict_object(properties: dict[str, JsonValue]) -> JsonObject:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_ASK_USER_DEFINITION: Final = BuiltInToolDefinition(
    name=BuiltInTool.ASK_USER,
    description=(
        "Ask the user a question and wait for the answer. Use it only when you cannot continue "
        "well without information or a decision that only the user can give. The turn pauses "
        "until the user answers, declines, or the question expires, which can take hours. Offer "
        "choices when the answer is one of a few options, and set allows_free_text to false to "
        "accept only those choices."
    ),
    parameters=_strict_object(
        {
            "question": {
                "type": "string",
                "description": "The question, complete enough to answer without other context.",
            },
            "choices": {
                "type": _nullable("array"),
                "items": {"type": "string"},
                "description": (
                    "Answers to offer, each distinct and not blank. null or an empty list asks "
                    "an open question."
                ),
            },
            "allows_free_text": {
                "type": _nullable("boolean"),
                "description": (
                    "Whether the user may answer in their own words instead of picking a choice. "
                    "null means true. false needs choices."
                ),
            },
        }
    ),
)

_DURABLE_WAIT_DEFINITION: Final = BuiltInToolDefinition(
    name=BuiltInTool.DURABLE_WAIT,
    description=(
        "Pause this turn for a number of seconds, then continue it. Use it to wait for something "
        "that takes time, such as a job finishing or a time the user named. The wait is durable: "
        "nothing runs while it lasts, it survives restarts, and it may last up to the session's "
        "limit (365 days unless the application set another). The result confirms how long you "
        "waited."
    ),
    parameters=_strict_object(
        {
            "duration_seconds": {
                "type": "integer",
                "description": "How long to wait, in whole seconds; at least 1.",
            },
            "reason": {
                "type": "string",
                "description": "Why you wait, in a short sentence the user can read.",
            },
        }
    ),
)

_WRITE_TODOS_DEFINITION: Final = BuiltInToolDefinition(
    name=BuiltInTool.WRITE_TODOS,
    description=(
        "Write the task plan: the whole list of tasks with their statuses, replacing the previous "
        "list. Use it for work with several steps, and call it again whenever a task starts or "
        "finishes, so the user sees progress. Send every task each time; an empty list clears "
        "the plan. Call it at most once per response."
    ),
    parameters=_strict_object(
        {
            "todos": {
                "type": "array",
                "description": "Every task of the plan, in the order to do them.",
                "items": _strict_object(
                    {
                        "content": {
                            "type": "string",
                            "description": "What the task achieves, in one short sentence.",
                        },
                        "status": {
                            "type": "string",
                            "enum": [status.value for status in TodoStatus],
                            "description": (
                                "pending before the task starts, in_progress while you work on "
                                "it, completed when it is done."
                            ),
                        },
                    }
                ),
            }
        }
    ),
)

BUILT_IN_TOOL_DEFINITIONS: Final[tuple[BuiltInToolDefinition, ...]] = (
    _ASK_USER_DEFINITION,
    _DURABLE_WAIT_DEFINITION,
    _WRITE_TODOS_DEFINITION,
)
"""Every built-in tool's definition, in :class:`BuiltInTool` order; filter by the enabled tools."""


def built_in_tool_definitions(enabled: Iterable[str]) -> tuple[BuiltInToolDefinition, ...]:
    """Return copies of the definitions of the ``enabled`` built-in tools, in canonical order.

    Pass ``turn.enabled_built_in_tools``; names that are not built-in tools are ignored.

    Example:
        >>> [definition.name.value for definition in built_in_tool_definitions(["write_todos", "ask_user"])]
        ['ask_user', 'write_todos']
    """
    wanted = {str(name) for name in enabled}
    return tuple(
        BuiltInToolDefinition(
            definition.name, definition.description, _copy_json(definition.parameters)
        )
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in wanted
    )


def parse_built_in_tools(names: Iterable[str]) -> frozenset[BuiltInTool]:
    """Return ``names`` as built-in tools, for ``AgentSessionOptions.built_in_tools``.

    Raises:
        ConfigurationError: When a name is not a built-in tool; the message names it and lists the tools.

    Example:
        >>> sorted(parse_built_in_tools(["ask_user"]))
        [<BuiltInTool.ASK_USER: 'ask_user'>]
    """
    if isinstance(names, str):
        raise ConfigurationError(
            f"built-in tools must be a collection of names, not the string {names!r}"
        )
    tools: set[BuiltInTool] = set()
    for name in names:
        try:
            tools.add(BuiltInTool(name))
        except ValueError:
            known = ", ".join(tool.value for tool in BuiltInTool)
            raise ConfigurationError(
                f"unknown built-in tool {name!r}; the built-in tools are {known}"
            ) from None
    return frozenset(tools)


def enabled_built_in_tool(tool_name: str, enabled: Iterable[str]) -> BuiltInTool | None:
    """Return the built-in tool a call of ``tool_name`` reaches, or ``None`` for an ordinary tool.

    An enabled name is reserved for its built-in tool; a disabled one is an ordinary tool name.

    Example:
        >>> enabled_built_in_tool("ask_user", {"ask_user"})
        <BuiltInTool.ASK_USER: 'ask_user'>
        >>> enabled_built_in_tool("ask_user", set()) is None
        True
    """
    try:
        tool = BuiltInTool(tool_name)
    except ValueError:
        return None
    return tool if tool.value in {str(name) for name in enabled} else None


def max_durable_wait_seconds(max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT) -> int:
    """Return the longest allowed ``duration_seconds``: whole seconds of ``max_durable_wait``.

    Raises:
        ConfigurationError: When ``max_durable_wait`` is not a ``timedelta`` of at least one second.

    Example:
        >>> max_durable_wait_seconds()
        31536000
    """
    if not isinstance(max_durable_wait, timedelta) or max_durable_wait < timedelta(seconds=1):
        raise ConfigurationError(
            f"max_durable_wait must be at least one second, got {max_durable_wait!r}"
        )
    return int(max_durable_wait.total_seconds())


class BuiltInToolArgumentsError(DexAgentsError, ValueError):
    """Arguments of a built-in call break its rules; ``str(error)`` is the exact recorded error.

    The session records the call ``failed`` with this text at once, so the model sees it.

    Attributes:
        tool: The built-in tool.
        reason: What is wrong, without the ``invalid ...:`` prefix.
    """

    def __init__(self, tool: BuiltInTool, reason: str) -> None:
        prefix = "invalid todos" if tool is BuiltInTool.WRITE_TODOS else f"invalid {tool} arguments"
        super().__init__(f"{prefix}: {reason}")
        self.tool = tool
        self.reason = reason


@dataclass(frozen=True)
class AskUserArguments:
    """Valid ``ask_user`` arguments.

    Attributes:
        question: The question; not blank.
        choices: Answers to offer, distinct and not blank; empty for an open question.
        allows_free_text: Whether an answer outside ``choices`` is accepted; ``True`` without choices.
    """

    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True


@dataclass(frozen=True)
class DurableWaitArguments:
    """Valid ``durable_wait`` arguments: whole seconds from 1 to the session's maximum."""

    duration_seconds: int
    reason: str

    def wait_until(self, now: datetime) -> datetime:
        """Return when the wait ends if it starts at ``now``, the record's ``wait_until``."""
        return now + timedelta(seconds=self.duration_seconds)


@dataclass(frozen=True)
class WriteTodosArguments:
    """Valid ``write_todos`` arguments: the whole new task list, possibly empty."""

    todos: tuple[AgentTodo, ...] = ()


BuiltInToolArguments: TypeAlias = AskUserArguments | DurableWaitArguments | WriteTodosArguments
"""Valid arguments of any built-in tool."""


def parse_ask_user_arguments(arguments: str | Mapping[str, object]) -> AskUserArguments:
    """Read and check ``ask_user`` arguments, given as JSON text or a decoded object.

    ``question`` must be a non-blank string. ``choices`` (null or absent for none) must be distinct
    non-blank strings. ``allows_free_text`` (null or absent means ``true``) must be a boolean, and
    ``false`` needs choices, so that some answer is possible.

    Raises:
        BuiltInToolArgumentsError: ``invalid ask_user arguments: <reason>``.

    Example:
        >>> parse_ask_user_arguments('{"question": "Which region?", "choices": ["eu", "us"], '
        ...     '"allows_free_text": null}')
        AskUserArguments(question='Which region?', choices=('eu', 'us'), allows_free_text=True)
        >>> parse_ask_user_arguments('{"question": " "}')
        Traceback (most recent call last):
        ...
        dex_agents._built_in_tools.BuiltInToolArgumentsError: invalid ask_user arguments: question must not be blank
    """
    reader = _ArgumentReader(
        BuiltInTool.ASK_USER, arguments, ("question", "choices", "allows_free_text")
    )
    question = reader.required_text("question")
    choices = reader.optional_choices("choices")
    allows_free_text = reader.optional_bool("allows_free_text", default=True)
    if not choices:
        if not allows_free_text:
            reader.fail("allows_free_text is false, so choices must not be empty")
        allows_free_text = True
    return AskUserArguments(question, choices, allows_free_text)


def parse_durable_wait_arguments(
    arguments: str | Mapping[str, object],
    *,
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT,
) -> DurableWaitArguments:
    """Read and check ``durable_wait`` arguments, given as JSON text or a decoded object.

    ``duration_seconds`` must be a whole number (``60`` or ``60.0``) from 1 to
    ``max_durable_wait`` in seconds; ``reason`` must be a non-blank string.

    Raises:
        BuiltInToolArgumentsError: ``invalid durable_wait arguments: <reason>``.
        ConfigurationError: When ``max_durable_wait`` is below one second.

    Example:
        >>> parse_durable_wait_arguments('{"duration_seconds": 3600, "reason": "build runs"}')
        DurableWaitArguments(duration_seconds=3600, reason='build runs')
        >>> parse_durable_wait_arguments('{"duration_seconds": 0, "reason": "now"}')
        Traceback (most recent call last):
        ...
        dex_agents._built_in_tools.BuiltInToolArgumentsError: invalid durable_wait arguments: duration_seconds must be from 1 to 31536000, got 0
    """
    limit = max_durable_wait_seconds(max_durable_wait)
    reader = _ArgumentReader(BuiltInTool.DURABLE_WAIT, arguments, ("duration_seconds", "reason"))
    seconds = reader.required_whole_number("duration_seconds")
    if not 1 <= seconds <= limit:
        reader.fail(f"duration_seconds must be from 1 to {limit}, got {seconds}")
    reason = reader.required_text("reason")
    return DurableWaitArguments(seconds, reason)


def parse_write_todos_arguments(arguments: str | Mapping[str, object]) -> WriteTodosArguments:
    """Read and check ``write_todos`` arguments, given as JSON text or a decoded object.

    ``todos`` must be an array (empty clears the plan) of objects with a non-blank ``content``
    string and a ``status`` of ``pending``, ``in_progress`` or ``completed``.

    Raises:
        BuiltInToolArgumentsError: ``invalid todos: <reason>``.

    Example:
        >>> parse_write_todos_arguments('{"todos": [{"content": "Back up", "status": "pending"}]}')
        WriteTodosArguments(todos=(AgentTodo(content='Back up', status=<TodoStatus.PENDING: 'pending'>),))
        >>> parse_write_todos_arguments('{"todos": [{"content": "Back up", "status": "done"}]}')
        Traceback (most recent call last):
        ...
        dex_agents._built_in_tools.BuiltInToolArgumentsError: invalid todos: todos[0].status must be one of pending, in_progress, completed, got 'done'
    """
    reader = _ArgumentReader(BuiltInTool.WRITE_TODOS, arguments, ("todos",))
    items = reader.required_list("todos")
    return WriteTodosArguments(
        tuple(_read_todo(reader, f"todos[{index}]", item) for index, item in enumerate(items))
    )


def parse_built_in_tool_arguments(
    tool: BuiltInTool,
    arguments: str | Mapping[str, object],
    *,
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT,
) -> BuiltInToolArguments:
    """Read and check the arguments of a call of ``tool``; see the per-tool parsers.

    Raises:
        BuiltInToolArgumentsError: With the tool's exact failure text.

    Example:
        >>> parse_built_in_tool_arguments(BuiltInTool.WRITE_TODOS, '{"todos": []}')
        WriteTodosArguments(todos=())
    """
    if tool is BuiltInTool.ASK_USER:
        return parse_ask_user_arguments(arguments)
    if tool is BuiltInTool.DURABLE_WAIT:
        return parse_durable_wait_arguments(arguments, max_durable_wait=max_durable_wait)
    return parse_write_todos_arguments(arguments)


def repeated_write_todos_call_ids(calls: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Return the IDs of the ``write_todos`` calls to fail, given one response's calls.

    ``calls`` are ``(tool_call_id, tool_name)`` pairs of one model response, with ``write_todos``
    enabled. When more than one calls ``write_todos``, each of them fails with
    :data:`WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR`; a single call is not repeated.

    Example:
        >>> sorted(repeated_write_todos_call_ids([("a", "write_todos"), ("b", "search"),
        ...     ("c", "write_todos")]))
        ['a', 'c']
    """
    ids = [call_id for call_id, name in calls if name == BuiltInTool.WRITE_TODOS.value]
    return frozenset(ids) if len(ids) > 1 else frozenset()


def is_allowed_question_answer(
    answer: str, *, choices: Sequence[str], allows_free_text: bool
) -> bool:
    """Return whether ``answer_question`` may accept ``answer`` for a question.

    A blank answer never answers. With choices and no free text, only an exact choice does.
    Without choices the question is open, whatever ``allows_free_text`` says.

    Example:
        >>> is_allowed_question_answer("eu", choices=("eu", "us"), allows_free_text=False)
        True
        >>> is_allowed_question_answer("asia", choices=("eu", "us"), allows_free_text=False)
        False
        >>> is_allowed_question_answer("  ", choices=(), allows_free_text=True)
        False
    """
    if not isinstance(answer, str) or is_blank_text(answer):
        return False
    return allows_free_text or not choices or answer in choices


def ask_user_answered_result(answer: str) -> str:
    """Return the model-visible result of an answered ``ask_user`` question.

    Example:
        >>> ask_user_answered_result("eu")
        '{"status":"answered","answer":"eu"}'
    """
    return _result_json({"status": "answered", "answer": answer})


def ask_user_result(resolution: QuestionResolution, answer: str | None = None) -> str:
    """Return the model-visible result of an ``ask_user`` question resolved as ``resolution``.

    Raises:
        ConfigurationError: When ``resolution`` is ``answered`` without an answer.

    Example:
        >>> ask_user_result(QuestionResolution.DECLINED)
        'The user declined to answer.'
        >>> ask_user_result(QuestionResolution.DEADLINE_PASSED)
        'question deadline passed'
    """
    if resolution is QuestionResolution.ANSWERED:
        if answer is None:
            raise ConfigurationError("an answered question needs its answer")
        return ask_user_answered_result(answer)
    if resolution is QuestionResolution.DECLINED:
        return QUESTION_DECLINED_RESULT
    return QUESTION_DEADLINE_PASSED_RESULT


def durable_wait_result(waited_seconds: int, reason: str) -> str:
    """Return the model-visible result of a finished ``durable_wait``.

    Example:
        >>> durable_wait_result(60, "build runs")
        '{"status":"completed","waited_seconds":60,"reason":"build runs"}'
    """
    return _result_json({"status": "completed", "waited_seconds": waited_seconds, "reason": reason})


def remaining_wait_seconds(wait_until: datetime, now: datetime) -> int:
    """Return the whole seconds from ``now`` until ``wait_until``, rounded up; 0 once it passed.

    Example:
        >>> from datetime import timezone
        >>> start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> remaining_wait_seconds(start + timedelta(seconds=9.2), start)
        10
    """
    remaining = (wait_until - now).total_seconds()
    return max(0, math.ceil(remaining))


def _result_json(result: Mapping[str, JsonValue]) -> str:
    # Key order is part of the text the model sees, so it follows the documented order, not sorted.
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False)


def _copy_json(value: JsonObject) -> JsonObject:
    copied: JsonObject = json.loads(json.dumps(value))
    return copied


def _read_todo(reader: _ArgumentReader, where: str, item: object) -> AgentTodo:
    if not isinstance(item, Mapping):
        reader.fail(f"{where} must be an object with content and status, got {_kind(item)}")
    unknown = sorted(str(key) for key in item if key not in ("content", "status"))
    if unknown:
        reader.fail(f"{where} has unknown field {unknown[0]!r}")
    content = item.get("content")
    if not isinstance(content, str):
        reader.fail(f"{where}.content must be a string, got {_kind(content)}")
    if not content.strip():
        reader.fail(f"{where}.content must not be blank")
    status = item.get("status")
    todo_status = _TODO_STATUSES.get(status) if isinstance(status, str) else None
    if todo_status is None:
        got = repr(status) if isinstance(status, str) else _kind(status)
        reader.fail(f"{where}.status must be one of {_TODO_STATUS_NAMES}, got {got}")
    return AgentTodo(content=content, status=todo_status)


class _ArgumentReader:
    """Reads one built-in call's arguments; every failure names the argument and the problem."""

    def __init__(
        self, tool: BuiltInTool, arguments: str | Mapping[str, object], names: tuple[str, ...]
    ) -> None:
        self._tool = tool
        self._values = self._decode(arguments)
        unknown = sorted(str(key) for key in self._values if key not in names)
        if unknown:
            self.fail(f"unknown argument {unknown[0]!r}")

    def fail(self, reason: str) -> NoReturn:
        raise BuiltInToolArgumentsError(self._tool, reason)

    def _decode(self, arguments: str | Mapping[str, object]) -> Mapping[str, object]:
        decoded: object = arguments
        if isinstance(arguments, (str, bytes)):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                self.fail("arguments are not valid JSON")
        if not isinstance(decoded, Mapping):
            self.fail(f"arguments must be a JSON object, got {_kind(decoded)}")
        return decoded

    def _present(self, name: str) -> object:
        return self._values.get(name)

    def _required(self, name: str) -> object:
        value = self._present(name)
        if value is None:
            self.fail(f"{name} is required")
        return value

    def required_text(self, name: str) -> str:
        value = self._required(name)
        if not isinstance(value, str):
            self.fail(f"{name} must be a string, got {_kind(value)}")
        if not value.strip():
            self.fail(f"{name} must not be blank")
        return value

    def required_whole_number(self, name: str) -> int:
        value = self._required(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"{name} must be a whole number of seconds, got {_kind(value)}")
        if isinstance(value, float):
            if not value.is_integer():
                self.fail(f"{name} must be a whole number of seconds, got {value!r}")
            return int(value)
        return value

    def required_list(self, name: str) -> list[object]:
        value = self._required(name)
        if not isinstance(value, list):
            self.fail(f"{name} must be an array, got {_kind(value)}")
        return value

    def optional_bool(self, name: str, *, default: bool) -> bool:
        value = self._present(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(f"{name} must be a boolean or null, got {_kind(value)}")
        return value

    def optional_choices(self, name: str) -> tuple[str, ...]:
        value = self._present(name)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(f"{name} must be an array of strings or null, got {_kind(value)}")
        seen: set[str] = set()
        for index, choice in enumerate(value):
            if not isinstance(choice, str):
                self.fail(f"{name}[{index}] must be a string, got {_kind(choice)}")
            if not choice.strip():
                self.fail(f"{name}[{index}] must not be blank")
            if choice in seen:
                self.fail(f"{name}[{index}] repeats the choice {choice!r}")
            seen.add(choice)
        return tuple(value)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__
