"""Function tools: schema derivation, argument validation and conversion, execution, results."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Annotated, Literal, NotRequired, Optional, TypedDict

import pytest
from dex_agents import (
    AgentEventWriter,
    ConfigurationError,
    ConfigurationTypeError,
    JsonValue,
    QuestionAnswer,
    QuestionResolution,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
)
from dex_agents.stepwise import FunctionTool, ToolCallContext, function_tool


class Priority(StrEnum):
    """How urgent a ticket is."""

    LOW = "low"
    HIGH = "high"


class Level(Enum):
    ONE = 1
    TWO = 2


@dataclass(frozen=True)
class Address:
    """A postal address."""

    street: str
    city: Annotated[str, "The city name"]
    unit: int | None = None


class LineItem(TypedDict):
    sku: str
    quantity: int
    note: NotRequired[str]


async def _no_heartbeat() -> None:
    return None


def _context(
    tool_call_id: str = "call-1", answers: tuple[QuestionAnswer, ...] = ()
) -> ToolCallContext:
    return ToolCallContext(
        idempotency_key=f"session-1/turn-1/{tool_call_id}",
        attempt=2,
        flow_id="session-1",
        turn_id="turn-1",
        tool_call_id=tool_call_id,
        events=AgentEventWriter.discarding(turn_id="turn-1"),
        heartbeat=_no_heartbeat,
        input_answers=answers,
    )


@function_tool(effect=ToolEffect.IDEMPOTENT_WRITE)
def everything(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    nothing: None,
    tags: list[str],
    attributes: dict[str, int],
    mode: Literal["fast", "slow"],
    priority: Priority,
    level: Level,
    either: int | str,
    maybe: Optional[str],  # noqa: UP045 - Optional is one of the forms to support
    address: Address,
    items: list[LineItem],
    described: Annotated[int, "How many copies"] = 1,
) -> dict[str, object]:
    """Exercise every supported type.

    The whole docstring is the description.
    """
    return {
        "text": text,
        "count": count,
        "ratio": ratio,
        "flag": flag,
        "nothing": nothing,
        "tags": tags,
        "attributes": attributes,
        "mode": mode,
        "priority": priority,
        "level": level,
        "either": either,
        "maybe": maybe,
        "address": address,
        "items": items,
        "described": described,
    }


def test_schema_is_derived_for_every_supported_type() -> None:
    schema = everything.parameters_schema
    properties = schema["properties"]
    assert isinstance(properties, dict)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == [
        "text", "count", "ratio", "flag", "nothing", "tags", "attributes", "mode",
        "priority", "level", "either", "maybe", "address", "items",
    ]  # fmt: skip
    assert properties["text"] == {"type": "string"}
    assert properties["count"] == {"type": "integer"}
    assert properties["ratio"] == {"type": "number"}
    assert properties["flag"] == {"type": "boolean"}
    assert properties["nothing"] == {"type": "null"}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}
    assert properties["attributes"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert properties["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert properties["priority"] == {
        "enum": ["low", "high"],
        "type": "string",
        "description": "How urgent a ticket is.",
    }
    assert properties["level"] == {"enum": [1, 2], "type": "integer"}
    assert properties["either"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert properties["maybe"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert properties["address"] == {
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string", "description": "The city name"},
            "unit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["street", "city"],
        "additionalProperties": False,
        "description": "A postal address.",
    }
    assert properties["items"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "sku": {"type": "string"},
                "quantity": {"type": "integer"},
                "note": {"type": "string"},
            },
            "required": ["sku", "quantity"],
            "additionalProperties": False,
        },
    }
    assert properties["described"] == {"type": "integer", "description": "How many copies"}


def test_name_description_and_policy_come_from_the_function() -> None:
    assert everything.name == "everything"
    assert everything.description == (
        "Exercise every supported type.\n\nThe whole docstring is the description."
    )
    assert everything.policy == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, None)
    definition = everything.definition()
    assert (definition.name, definition.parameters) == ("everything", everything.parameters_schema)


def test_explicit_name_description_and_schema_win() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }

    @function_tool(
        effect=ToolEffect.READ,
        requires_approval=True,
        name="search-docs",
        description="Search the docs.",
        parameters_schema=schema,
    )
    def search(q: str) -> str:
        """Ignored docstring."""
        return q

    assert (search.name, search.description) == ("search-docs", "Search the docs.")
    assert search.parameters_schema == schema
    assert search.policy == ToolPolicy(ToolEffect.READ, True)


_VALID_ARGUMENTS = {
    "text": "hi",
    "count": 3,
    "ratio": 2,
    "flag": True,
    "nothing": None,
    "tags": ["a", "b"],
    "attributes": {"x": 1},
    "mode": "fast",
    "priority": "high",
    "level": 2,
    "either": "word",
    "maybe": None,
    "address": {"street": "Main St 1", "city": "Springfield"},
    "items": [{"sku": "A-1", "quantity": 2}],
}


async def test_arguments_are_converted_to_the_annotated_types() -> None:
    result = await everything.invoke(json.dumps(_VALID_ARGUMENTS), _context())
    assert isinstance(result, ToolExecutionResult)
    # The function returned a dict holding an Enum and a dataclass: serialized as JSON.
    output = json.loads(result.output)
    assert output["ratio"] == 2.0
    assert output["priority"] == "high"
    assert output["level"] == 2
    assert output["address"] == {"street": "Main St 1", "city": "Springfield", "unit": None}
    assert output["items"] == [{"sku": "A-1", "quantity": 2}]
    assert output["described"] == 1

    converted = everything.parse_arguments(json.dumps(_VALID_ARGUMENTS))
    assert converted["priority"] is Priority.HIGH
    assert converted["level"] is Level.TWO
    assert converted["address"] == Address("Main St 1", "Springfield")
    assert isinstance(converted["ratio"], float)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"count": "3"}, "argument count must be an integer, got string"),
        ({"count": True}, "argument count must be an integer, got boolean"),
        ({"flag": 1}, "argument flag must be a boolean, got integer"),
        ({"tags": ["a", 2]}, "argument tags[1] must be a string, got integer"),
        ({"attributes": {"x": "y"}}, "argument attributes.x must be an integer, got string"),
        ({"mode": "medium"}, 'argument mode must be one of "fast", "slow", got "medium"'),
        ({"priority": "urgent"}, 'argument priority must be one of "low", "high", got "urgent"'),
        ({"level": "2"}, 'argument level must be one of 1, 2, got "2"'),
        ({"either": 1.5}, "argument either must be an integer or a string, got number"),
        ({"address": {"street": "x"}}, "missing required argument address.city"),
        ({"address": {"street": "x", "city": "y", "zip": 1}}, "unexpected argument address.zip"),
        ({"address": "Main St"}, "argument address must be an object, got string"),
        (
            {"items": [{"sku": "A", "quantity": "many"}]},
            "argument items[0].quantity must be an integer, got string",
        ),
        ({"extra": 1}, "unexpected argument extra"),
        ({"text": None}, "missing required argument text"),
    ],
)
def test_invalid_arguments_name_the_argument_and_the_problem(
    change: dict[str, object], problem: str
) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        everything.parse_arguments(json.dumps({**_VALID_ARGUMENTS, **change}))
    assert str(raised.value) == f"invalid arguments for everything: {problem}"


def test_a_missing_argument_is_named() -> None:
    arguments = dict(_VALID_ARGUMENTS)
    del arguments["count"]
    with pytest.raises(
        ToolExecutionError,
        match=r"^invalid arguments for everything: missing required argument count$",
    ):
        everything.parse_arguments(json.dumps(arguments))


@pytest.mark.parametrize("text", ["{not json", "[1,", "nan?"])
def test_arguments_that_are_not_json_give_the_exact_text(text: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        everything.parse_arguments(text)
    assert str(raised.value) == "invalid arguments for everything: arguments are not valid JSON"


def test_arguments_that_are_not_an_object_are_refused() -> None:
    with pytest.raises(ToolExecutionError) as raised:
        everything.parse_arguments("[1, 2]")
    assert str(raised.value) == (
        "invalid arguments for everything: arguments must be a JSON object, got array"
    )


def test_null_for_an_optional_argument_means_absent() -> None:
    @function_tool(effect=ToolEffect.READ)
    def page(limit: int = 10, cursor: str | None = "start") -> str:
        return f"{limit}:{cursor}"

    assert page.parse_arguments('{"limit": null}') == {}
    assert page.parse_arguments('{"cursor": null}') == {"cursor": None}
    assert page.parse_arguments("") == {}
    assert page.parameters_schema == {
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "cursor": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "additionalProperties": False,
    }


async def test_a_sync_tool_runs_in_a_worker_thread_and_returns_its_str() -> None:
    threads: list[threading.Thread] = []

    @function_tool(effect=ToolEffect.READ)
    def where(name: str) -> str:
        threads.append(threading.current_thread())
        return f"hello {name}"

    result = await where.invoke('{"name": "Ada"}', _context())
    assert result == ToolExecutionResult(output="hello Ada")
    assert threads and threads[0] is not threading.main_thread()


async def test_an_async_tool_runs_on_the_loop_and_gets_its_context() -> None:
    seen: list[ToolCallContext] = []

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    async def refund(order_id: str, amount_cents: int, context: ToolCallContext) -> dict[str, str]:
        """Refund part of an order."""
        seen.append(context)
        await asyncio.sleep(0)
        return {"refund": f"{order_id}:{amount_cents}", "key": context.idempotency_key}

    assert "context" not in json.dumps(refund.parameters_schema)
    context = _context("call-9")
    result = await refund.invoke('{"order_id": "7", "amount_cents": 250}', context)
    assert isinstance(result, ToolExecutionResult)
    assert json.loads(result.output) == {"refund": "7:250", "key": "session-1/turn-1/call-9"}
    assert seen == [context]
    assert (seen[0].attempt, seen[0].flow_id, seen[0].turn_id, seen[0].tool_call_id) == (
        2,
        "session-1",
        "turn-1",
        "call-9",
    )


async def test_a_tool_asks_and_reads_the_answer_from_its_context() -> None:
    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    def ship(order_id: str, context: ToolCallContext) -> str | ToolInputRequested:
        if not context.input_answers:
            return ToolInputRequested("Ship to the saved address?", choices=("yes", "no"))
        return f"shipped {order_id}" if context.input_answers[-1].answer == "yes" else "not shipped"

    first = await ship.invoke('{"order_id": "7"}', _context())
    assert isinstance(first, ToolInputRequested)
    answer = QuestionAnswer("call-1-input-1", "Ship?", QuestionResolution.ANSWERED, "yes")
    second = await ship.invoke('{"order_id": "7"}', _context(answers=(answer,)))
    assert second == ToolExecutionResult(output="shipped 7")


async def test_results_that_are_not_str_are_json() -> None:
    @function_tool(effect=ToolEffect.READ)
    def numbers() -> list[int]:
        return [1, 2]

    @function_tool(effect=ToolEffect.READ)
    def unicode() -> dict[str, str]:
        return {"city": "Zürich"}

    @function_tool(effect=ToolEffect.READ)
    def nothing() -> None:
        return None

    assert await numbers.invoke("{}", _context()) == ToolExecutionResult("[1, 2]")
    assert await unicode.invoke("{}", _context()) == ToolExecutionResult('{"city": "Zürich"}')
    assert await nothing.invoke("{}", _context()) == ToolExecutionResult("null")


async def test_a_result_that_is_not_json_is_a_type_error() -> None:
    @function_tool(effect=ToolEffect.READ)
    def opaque() -> object:
        return object()

    with pytest.raises(
        ConfigurationTypeError, match="tool opaque returned object, which is not JSON"
    ):
        await opaque.invoke("{}", _context())


async def test_tool_execution_error_from_the_tool_passes_through() -> None:
    @function_tool(effect=ToolEffect.READ)
    async def find(order_id: str) -> str:
        raise ToolExecutionError(f"order {order_id} does not exist")

    with pytest.raises(ToolExecutionError, match=r"^order 9 does not exist$"):
        await find.invoke('{"order_id": "9"}', _context())


def test_the_function_stays_callable() -> None:
    @function_tool(effect=ToolEffect.READ)
    def add(a: int, b: int) -> int:
        return a + b

    assert isinstance(add, FunctionTool)
    assert add(2, 3) == 5


@dataclass
class _Node:
    children: list[_Node] = field(default_factory=list)


def test_unsupported_definitions_are_refused_clearly() -> None:
    with pytest.raises(
        ConfigurationTypeError, match=r"tool untyped: parameter x needs a type hint"
    ):

        @function_tool(effect=ToolEffect.READ)
        def untyped(x) -> str:  # type: ignore[no-untyped-def]
            return ""

    with pytest.raises(
        TypeError, match=r"tool spread: parameter rest cannot be \*args or \*\*kwargs"
    ):

        @function_tool(effect=ToolEffect.READ)
        def spread(*rest: int) -> str:
            return ""

    with pytest.raises(ConfigurationTypeError, match=r"tool odd: parameter x has unsupported type"):

        @function_tool(effect=ToolEffect.READ)
        def odd(x: complex) -> str:
            return ""

    with pytest.raises(ConfigurationTypeError, match=r"recursive type _Node"):

        @function_tool(effect=ToolEffect.READ)
        def tree(node: _Node) -> str:
            return ""

    with pytest.raises(ConfigurationError, match=r"tool name 'bad name' must be 1 to 64"):

        @function_tool(effect=ToolEffect.READ, name="bad name")
        def named() -> str:
            return ""

    with pytest.raises(ConfigurationTypeError, match="effect must be a ToolEffect"):
        function_tool(effect="read")  # type: ignore[arg-type]


_SEARCH_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "scope": {"enum": ["tickets", "orders"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@function_tool(effect=ToolEffect.READ, parameters_schema=_SEARCH_SCHEMA)
def search(
    query: str, scope: str = "tickets", limit: int = 10, tags: list[str] | None = None
) -> str:
    """Search."""
    return f"{query}/{scope}/{limit}/{tags}"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"query": ""}, "argument query must have at least 1 characters"),
        (
            {"query": "x", "scope": "users"},
            'argument scope must be one of "tickets", "orders", got "users"',
        ),
        ({"query": "x", "limit": 0}, "argument limit must be at least 1, got 0"),
        ({"query": "x", "limit": 51}, "argument limit must be at most 50, got 51"),
        ({"query": "x", "tags": ["ok", "Not"]}, "argument tags[1] must match the pattern ^[a-z]+$"),
        ({"query": 3}, "argument query must be of type string, got integer"),
        ({}, "missing required argument query"),
        ({"query": "x", "other": 1}, "unexpected argument other"),
    ],
)
def test_an_explicit_schema_is_checked(arguments: dict[str, object], problem: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        search.parse_arguments(json.dumps(arguments))
    assert str(raised.value) == f"invalid arguments for search: {problem}"


async def test_arguments_that_fit_an_explicit_schema_run() -> None:
    result = await search.invoke('{"query": "teapot", "limit": 5, "tags": ["a"]}', _context())
    assert result == ToolExecutionResult("teapot/tickets/5/['a']")
