"""Function tools: plain sync or async Python functions offered to the model as tools."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from dex_agents._event_writer import (
    AgentEventWriter,
)
from dex_agents._runner_contract import (
    DeferredToolOutcome,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
)
from dex_agents._tool_outcome_check import ToolOutcomeCheck
from dex_agents._tool_policy import ToolEffect, ToolPolicy
from dex_agents._values import QuestionAnswer
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError
from dex_agents.stepwise._json_schema import (
    ArgumentValidationError,
    JsonSchema,
    JsonValue,
    ParametersModel,
    compile_parameters,
)
from dex_agents.stepwise._json_schema_validation import validate_against_schema
from dex_agents.stepwise._model_client import ModelToolDefinition

__all__ = [
    "FunctionTool",
    "ToolCallContext",
    "function_tool",
    "invalid_arguments_message",
]

# What providers accept as a function name.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ToolCallContext:
    """What a function tool learns about the call it runs in.

    Declare a parameter of this type to receive it; it is never part of the tool's schema.

    Attributes:
        idempotency_key: ``<flow_id>/<turn_id>/<tool_call_id>``, the same on every attempt; pass it
            to services that drop duplicate requests.
        attempt: One-based attempt of the tool Step.
        flow_id: The session ID.
        turn_id: ``turn-<n>``.
        tool_call_id: The model's tool call ID.
        events: The AgentEventWriter bound to the turn and attempt.
        heartbeat: Records liveness; await it from long work.
        input_answers: Answers to the questions this call asked by returning
            ``ToolInputRequested``, oldest first.
        input_continuation: The continuation of the call's last question, or ``None``.
        heartbeat_checkpoint: What an earlier attempt saved with ``save_heartbeat_checkpoint``.
        save_heartbeat_checkpoint: Records a heartbeat carrying a checkpoint, or ``None`` when
            the caller cannot save checkpoints.

    Example:
        >>> @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
        ... async def refund_order(order_id: str, context: ToolCallContext) -> str:
        ...     return await payments.refund(order_id, idempotency_key=context.idempotency_key)
    """

    idempotency_key: str
    attempt: int
    flow_id: str
    turn_id: str
    tool_call_id: str
    events: AgentEventWriter
    heartbeat: Callable[[], Awaitable[None]]
    input_answers: tuple[QuestionAnswer, ...] = ()
    input_continuation: str | None = None
    heartbeat_checkpoint: str | None = None
    save_heartbeat_checkpoint: Callable[[str], Awaitable[None]] | None = None


def invalid_arguments_message(tool_name: str, problem: str) -> str:
    """The model-visible text of arguments that break a tool's schema."""
    return f"invalid arguments for {tool_name}: {problem}"


@dataclass(frozen=True, eq=False)
class FunctionTool:
    """A Python function offered to the model as a tool; build it with ``@function_tool``.

    Calling the FunctionTool calls the function itself, so it stays usable as plain code.
    """

    name: str
    description: str
    effect: ToolEffect
    requires_approval: bool | None
    function: Callable[..., object]
    parameters: ParametersModel = field(repr=False)
    outcome_check: ToolOutcomeCheck | None = None

    @property
    def parameters_schema(self) -> JsonSchema:
        """The JSON Schema of the tool's arguments."""
        return self.parameters.schema()

    @property
    def policy(self) -> ToolPolicy:
        """The tool's own effect, approval and outcome check, used when the session has no
        explicit policy."""
        return ToolPolicy(self.effect, self.requires_approval, self.outcome_check)

    def definition(self) -> ModelToolDefinition:
        """The definition offered to the model."""
        return ModelToolDefinition(self.name, self.description, self.parameters_schema)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.function(*args, **kwargs)

    def parse_arguments(self, arguments: str) -> dict[str, object]:
        """Decodes, validates, and converts JSON arguments text into keyword arguments.

        Blank text means no arguments, which some providers send for a tool without parameters.

        Raises:
            ToolExecutionError: ``invalid arguments for <tool>: arguments are not valid JSON``,
                or a text that names the argument and the problem.
        """
        try:
            decoded: object = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise ToolExecutionError(
                invalid_arguments_message(self.name, "arguments are not valid JSON")
            ) from None
        try:
            if self.parameters.explicit_schema is not None:
                validate_against_schema(decoded, self.parameters.explicit_schema)
            return self.parameters.convert(decoded)
        except ArgumentValidationError as error:
            raise ToolExecutionError(invalid_arguments_message(self.name, str(error))) from None

    async def invoke(self, arguments: str, context: ToolCallContext) -> DeferredToolOutcome:
        """Runs the function once with the converted arguments; a sync one in a worker thread.

        A ``str`` result is the output; a ToolExecutionResult, ToolInputRequested, or
        ToolTaskStarted passes through; anything else is serialized as JSON.

        Raises:
            ToolExecutionError: For invalid arguments, or when the function raises it.
            ConfigurationTypeError: When the result cannot be serialized as JSON.
        """
        kwargs = self.parse_arguments(arguments)
        if self.parameters.context_parameter is not None:
            kwargs[self.parameters.context_parameter] = context
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**kwargs)
        else:
            result = await asyncio.to_thread(functools.partial(self.function, **kwargs))
            if inspect.isawaitable(result):
                result = await result
        return self._outcome(result)

    def _outcome(self, result: object) -> DeferredToolOutcome:
        if isinstance(result, ToolExecutionResult | ToolInputRequested | ToolTaskStarted):
            return result
        if isinstance(result, str):
            return ToolExecutionResult(output=result)
        try:
            return ToolExecutionResult(
                output=json.dumps(result, ensure_ascii=False, default=_json_default)
            )
        except (TypeError, ValueError) as error:
            raise ConfigurationTypeError(
                f"tool {self.name} returned {type(result).__name__}, which is not JSON: {error}"
            ) from error


def _json_default(value: object) -> JsonValue:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {item.name: getattr(value, item.name) for item in dataclasses.fields(value)}  # type: ignore[misc]
    if isinstance(value, enum.Enum):
        return value.value  # type: ignore[no-any-return]
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise ConfigurationTypeError(f"{type(value).__name__} is not JSON serializable")


def function_tool(
    *,
    effect: ToolEffect,
    requires_approval: bool | None = None,
    name: str | None = None,
    description: str | None = None,
    parameters_schema: Mapping[str, JsonValue] | None = None,
    outcome_check: ToolOutcomeCheck | None = None,
) -> Callable[[Callable[..., object]], FunctionTool]:
    """Turns a sync or async function into a tool.

    The name defaults to the function's name and the description to its docstring. The JSON
    Schema comes from the type hints: str, int, float, bool, None, list, dict, Literal, Enum,
    unions, dataclasses, TypedDict, and ``Annotated[T, "description"]``. A parameter typed
    ``ToolCallContext`` receives the call's context. ``parameters_schema`` replaces the derived
    schema that the model sees; the arguments are checked against it and against the type hints.
    ``outcome_check`` (``non_idempotent_write`` and ``unclassified`` tools only) answers, after a
    call's attempt was lost, whether it took effect; see ``ToolOutcomeCheck``.

    Raises:
        ConfigurationError: For a name providers refuse (letters, digits, ``_`` and ``-``, 1 to 64),
            or an outcome check on a ``read`` or ``idempotent_write`` tool.
        ConfigurationTypeError: For ``*args``/``**kwargs``, a parameter without a type hint, or an unsupported
            type.

    Example:
        >>> from typing import Annotated
        >>> @function_tool(effect=ToolEffect.READ)
        ... async def lookup_order(order_id: Annotated[str, "The order ID"]) -> dict[str, str]:
        ...     '''Look up an order by its ID.'''
        ...     return await orders.get(order_id)
    """
    if not isinstance(effect, ToolEffect):
        raise ConfigurationTypeError(f"effect must be a ToolEffect, got {effect!r}")
    # Validates the effect, approval and check together, before the function is even decorated.
    ToolPolicy(effect, requires_approval, outcome_check)

    def decorate(function: Callable[..., object]) -> FunctionTool:
        tool_name = name if name is not None else function.__name__
        if not _TOOL_NAME.fullmatch(tool_name):
            raise ConfigurationError(
                f"tool name {tool_name!r} must be 1 to 64 letters, digits, '_' or '-'"
            )
        tool_description = description if description is not None else inspect.getdoc(function)
        return FunctionTool(
            name=tool_name,
            description=tool_description or "",
            effect=effect,
            requires_approval=requires_approval,
            function=function,
            parameters=compile_parameters(
                function, f"tool {tool_name}", ToolCallContext, parameters_schema
            ),
            outcome_check=outcome_check,
        )

    return decorate
