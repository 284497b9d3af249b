"""The scenario agent, described once for every runner.

A scenario sends the agent one user message. Plain text gets ``Echo: <text>``.
A JSON ``ScenarioCommand`` makes the scripted model call the listed tools in
one response (so they run as parallel Steps), optionally stop the N-th model
call of the turn at a gate, and then either reply ``done: <tool outputs>`` or
fail after the tools ran. Every real model and tool call is written to the
InvocationLog before it stops at a gate, so a killed attempt still counts. The
gate ``KILL_WORKER_GATE`` makes the tool SIGKILL its own Worker process the
moment it has run, before the Worker can send anything more.

A runner factory (see ``runners.py``) turns a ``ScenarioAgentSpec`` into a
Flow: it offers ``SCENARIO_TOOLS`` with their effects, answers model calls with
``scripted_reply``, and runs tools with ``run_scenario_tool``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Protocol

from dex_agents import (
    DexAgentsError,
    JsonValue,
    ModelCallIdentity,
    ModelSpendRefusal,
    ModelSpendReport,
    ToolEffect,
)
from dex_agents._deferred_tool_context import current_deferred_tool_execution
from dex_agents.testing._file_gate import FileGate
from dex_agents.testing._invocation_log import InvocationLog
from dex_agents.testing._session_prefix import session_prefix_of

MAIN_FLOW_TYPE = "ScenarioAgent"
"""Flow type of the main scenario agent: every tool, the question built-ins, no deadline."""
DEADLINE_FLOW_TYPE = "ScenarioDeadlineAgent"
"""Flow type of the scenario agent whose approvals and questions expire after ``APPROVAL_DEADLINE``."""
PLAN_FLOW_TYPE = "ScenarioPlanAgent"
"""Flow type of the plan-mode scenario agent (``write_todos``, plan mode on)."""
MCP_FLOW_TYPE = "ScenarioMcpAgent"
"""The agent that offers the scenario MCP server's tools (``ScenarioFeature.MCP_TOOLS``)."""
QUESTION_BUILT_IN_TOOLS = frozenset({"ask_user", "durable_wait"})
"""Built-in tools of the main and deadline agents; session features, so every runner has them."""
APPROVAL_DEADLINE = timedelta(seconds=2)
"""The ``interrupt_deadline`` of the deadline agent."""
INSTRUCTIONS = "You are the scenario agent of the shared test suite."
"""The instructions every runner gives the scenario agent."""
MODEL_INVOCATION = "model"
"""The ``InvocationLog`` name of a real model call of the scenario agent."""
MODEL_INPUT_INVOCATION = "model-input"
"""The ``InvocationLog`` name whose key is the JSON list of the user texts one model call saw
(:func:`model_input_user_texts` reads them back)."""
BROKEN_TOOL_ERROR = "the broken tool always fails"
"""The ``ToolExecutionError`` text of the ``broken`` tool."""
MODEL_FAILURE = "the scripted model fails after the tools ran"
"""The error the scripted model raises when a command asks it to fail after its tools ran."""
KILL_WORKER_GATE = "!kill-worker"
"""A tool called with this gate SIGKILLs its Worker right after it ran (no gate file)."""


LEDGER_INVOCATION = "ledger"
"""InvocationLog name of a ``pay`` or ``pay_again`` write that took effect, keyed by its
idempotency key: what the tools' outcome checks look up."""
APPLIED_GATE_PREFIX = "applied"
"""A ``pay``/``pay_again`` gate named so takes effect before it stops at its gate (the write
happened, then the Worker died); any other gate takes effect after its gate."""


@dataclass(frozen=True)
class ScenarioTool:
    """A tool of the scenario agent; each takes one ``gate`` argument (empty: no gate).

    ``outcome_check``: the tool declares the scenario outcome check in its policy
    (``scenario_tool_policies``), which runs it again when it was not applied if
    ``run_again_if_not_applied``.
    """

    name: str
    effect: ToolEffect
    requires_approval: bool | None
    description: str
    outcome_check: bool = False
    run_again_if_not_applied: bool = False


SCENARIO_TOOLS: tuple[ScenarioTool, ...] = (
    ScenarioTool("lookup", ToolEffect.READ, None, "Read something."),
    ScenarioTool("upsert", ToolEffect.IDEMPOTENT_WRITE, None, "Write with an idempotency key."),
    ScenarioTool(
        "send_once", ToolEffect.NON_IDEMPOTENT_WRITE, False, "A write that must never repeat."
    ),
    ScenarioTool("refund", ToolEffect.NON_IDEMPOTENT_WRITE, None, "A write that needs approval."),
    ScenarioTool("broken", ToolEffect.READ, None, "A read that raises ToolExecutionError."),
    ScenarioTool(
        "pay",
        ToolEffect.NON_IDEMPOTENT_WRITE,
        False,
        "A payment that runs once; its outcome check looks it up by its key.",
        outcome_check=True,
    ),
    ScenarioTool(
        "pay_again",
        ToolEffect.NON_IDEMPOTENT_WRITE,
        False,
        "A payment that runs once, and once more when its check finds it not applied.",
        outcome_check=True,
        run_again_if_not_applied=True,
    ),
)
"""The tools of the scenario agent, one per effect class plus a tool that always fails, and two
payments with an outcome check."""


class ScenarioSessionUnknownError(DexAgentsError, LookupError):
    """A per-session scenario agent read its state directory outside any session's Step."""


_CURRENT_SESSION: ContextVar[str | None] = ContextVar("scenario_session", default=None)


def current_scenario_session() -> str | None:
    """The session whose model or tool call runs here, or ``None`` when unknown.

    Set for a model call by the agent's spend limit (``ScenarioSpendLimit.check_model_call``
    runs in the ``RunModel`` or ``CompactContext`` Step right before the runner's model call),
    for a tool by ``run_scenario_tool`` and by :func:`scenario_session`; else the session of the
    current tool Step (``current_deferred_tool_execution``).
    """
    session = _CURRENT_SESSION.get()
    if session is not None:
        return session
    call = current_deferred_tool_execution()
    return call.flow_id if call is not None else None


@contextmanager
def scenario_session(session_id: str) -> Iterator[None]:
    """Run the enclosed code as ``session_id``'s, for code a framework runs outside the Step's
    context (such as a local model server's request handler).

    Example:
        >>> with scenario_session("t0123456789ab-chat"):
        ...     current_scenario_session()
        't0123456789ab-chat'
    """
    token = _CURRENT_SESSION.set(session_id)
    try:
        yield
    finally:
        _CURRENT_SESSION.reset(token)


def session_state_dir(state_root: Path, session_id: str) -> Path:
    """The state directory of ``session_id``'s test under a shared ``state_root``.

    A session started under a ``dex_session_prefix`` (``t<12 hex>-``) has the directory of that
    prefix, so tests sharing one Worker never see each other's gates, logs or jobs.

    Raises:
        ScenarioSessionUnknownError: ``session_id`` has no such prefix.
    """
    prefix = session_prefix_of(session_id)
    if prefix is None:
        raise ScenarioSessionUnknownError(
            f"session {session_id!r} has no test prefix (t<12 hex>-): a scenario agent with "
            "per-session state needs every session started under dex_session_prefix"
        )
    return state_root / prefix.rstrip("-")


@dataclass(frozen=True)
class ScenarioAgentSpec:
    """One scenario agent: its Flow type, approval deadline, and the test's state directory.

    With ``per_session_state``, one Worker serves the sessions of many tests: ``state_root``
    holds a directory per test (see :func:`session_state_dir`), and ``state_dir`` is the one
    of the session whose model or tool call runs now (:func:`current_scenario_session`).
    """

    flow_type: str
    state_root: Path
    interrupt_deadline: timedelta | None = None
    tools: tuple[ScenarioTool, ...] = SCENARIO_TOOLS
    instructions: str = INSTRUCTIONS
    built_in_tools: frozenset[str] = frozenset()
    plan_mode_enabled: bool = False
    #: Offer the tools of the scenario MCP server (``scenario_mcp_server``) too.
    mcp_tools: bool = False
    #: One state directory per test's session prefix under ``state_root``.
    per_session_state: bool = False

    @property
    def state_dir(self) -> Path:
        """The state directory of the current call's test.

        Raises:
            ScenarioSessionUnknownError: ``per_session_state`` and no session is known here.
        """
        if not self.per_session_state:
            return self.state_root
        session = current_scenario_session()
        if session is None:
            raise ScenarioSessionUnknownError(
                f"{self.flow_type}: no session's model or tool call runs here, so its state "
                "directory is unknown"
            )
        return session_state_dir(self.state_root, session)

    def state_dir_of(self, session_id: str) -> Path:
        """The state directory of ``session_id``'s test."""
        if not self.per_session_state:
            return self.state_root
        return session_state_dir(self.state_root, session_id)

    @property
    def model_spend_limit(self) -> ScenarioSpendLimit:
        """The agent's spend limit; every runner passes it as ``model_spend_limit``."""
        return ScenarioSpendLimit(self)

    @property
    def invocation_log(self) -> InvocationLog:
        return invocation_log(self.state_dir)


def scenario_agent_specs(
    state_dir: Path, *, per_session_state: bool = False
) -> list[ScenarioAgentSpec]:
    """The agents every Worker child and test build, in the same order.

    ``per_session_state``: ``state_dir`` is a root with a directory per test (see
    :class:`ScenarioAgentSpec`), for a Worker that tests share.
    """
    shared = per_session_state
    return [
        ScenarioAgentSpec(
            MAIN_FLOW_TYPE,
            state_dir,
            built_in_tools=QUESTION_BUILT_IN_TOOLS,
            per_session_state=shared,
        ),
        ScenarioAgentSpec(
            DEADLINE_FLOW_TYPE,
            state_dir,
            interrupt_deadline=APPROVAL_DEADLINE,
            built_in_tools=QUESTION_BUILT_IN_TOOLS,
            per_session_state=shared,
        ),
        ScenarioAgentSpec(
            PLAN_FLOW_TYPE,
            state_dir,
            built_in_tools=frozenset({"write_todos"}),
            plan_mode_enabled=True,
            per_session_state=shared,
        ),
        ScenarioAgentSpec(MCP_FLOW_TYPE, state_dir, mcp_tools=True, per_session_state=shared),
    ]


def invocation_log(state_dir: Path) -> InvocationLog:
    """The ``InvocationLog`` every real model and tool call of the scenario agent is written to."""
    return InvocationLog(state_dir / "invocations.jsonl")


@dataclass(frozen=True)
class ScenarioCall:
    """One tool call a ``ScenarioCommand`` asks the scripted model for.

    Attributes:
        tool: The tool to call.
        gate: The ``FileGate`` the tool stops at (empty: none).
        arguments: The call's arguments; ``None`` sends ``{"gate": gate}``, as the scenario
            tools take.
    """

    tool: str
    gate: str = ""
    arguments: dict[str, JsonValue] | None = None


@dataclass(frozen=True)
class ScenarioCommand:
    """What the scenario model does in a turn; sent as the user message's JSON."""

    calls: tuple[ScenarioCall, ...] = ()
    gate_model_call: int | None = None
    fail_after_tools: bool = False

    def to_message(self) -> str:
        return json.dumps(
            {
                "calls": [
                    {"tool": call.tool, "gate": call.gate, "arguments": call.arguments}
                    for call in self.calls
                ],
                "gate_model_call": self.gate_model_call,
                "fail_after_tools": self.fail_after_tools,
            }
        )

    @classmethod
    def from_message(cls, text: str) -> ScenarioCommand | None:
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        return cls(
            calls=tuple(
                ScenarioCall(call["tool"], call.get("gate", ""), call.get("arguments"))
                for call in value["calls"]
            ),
            gate_model_call=value.get("gate_model_call"),
            fail_after_tools=bool(value.get("fail_after_tools")),
        )


def model_input_user_texts(log: InvocationLog) -> list[list[str]]:
    """The user texts each logged model call saw (``scripted_reply(user_texts=...)``), oldest
    call first."""
    return [list(json.loads(key)) for key in log.keys(MODEL_INPUT_INVOCATION)]


def model_gate_name(call_index: int) -> str:
    """The ``FileGate`` name at which the ``call_index``-th model call of a turn stops (from 1)."""
    return f"model-call-{call_index}"


@dataclass(frozen=True)
class ScenarioToolCall:
    """A tool call the scripted model makes: the tool and its arguments."""

    tool: str
    arguments: dict[str, JsonValue]


@dataclass(frozen=True)
class ScenarioReply:
    """The model's answer: text, or tool calls to run in parallel."""

    text: str | None = None
    tool_calls: tuple[ScenarioToolCall, ...] = field(default_factory=tuple)


class ScenarioModelCall(Protocol):
    """What the scripted model reads from one model call's input, as the framework passed it.

    A runner's own reading of a model call is one when it has these three (read-only)
    attributes, such as the Claude Agent SDK's ``FakeModelRequest``; otherwise
    :class:`ScenarioModelInput` holds them.
    """

    @property
    def user_texts(self) -> Sequence[str]:
        """Every user text of the input, oldest first; the last is the turn's message."""
        ...

    @property
    def model_call_index(self) -> int:
        """This call's index in the turn, from 1: one more than the model responses since the
        turn's user message."""
        ...

    @property
    def tool_outputs(self) -> Sequence[str]:
        """The outputs of the turn's tool calls so far, in order, as the model reads them."""
        ...


@dataclass(frozen=True)
class ScenarioModelInput:
    """A :class:`ScenarioModelCall` from its three readings.

    Example:
        >>> call = ScenarioModelInput(["hello"], model_call_index=1, tool_outputs=[])
        >>> call.user_texts[-1], call.model_call_index
        ('hello', 1)
    """

    user_texts: Sequence[str]
    model_call_index: int
    tool_outputs: Sequence[str]


async def scripted_reply(
    spec: ScenarioAgentSpec,
    call: ScenarioModelCall,
    session_settings: Mapping[str, object] | None = None,
) -> ScenarioReply:
    """The scenario model's answer to ``call``: deterministic in its input, as a rerun RunModel
    needs.

    The turn's message (the last of ``call.user_texts``) is a ``ScenarioCommand``, or text the
    model echoes. A text reply ends with `` [model=<m>]`` when the turn's ``session_settings``
    name a model, so a scenario sees which settings each turn ran with. Every user text of the
    input is logged under ``MODEL_INPUT_INVOCATION``, so a scenario checks what the model saw
    (such as the note a cancelled turn left).

    Raises:
        RuntimeError: The command asks to fail after the tools ran.

    Example:
        >>> import asyncio, tempfile
        >>> spec = ScenarioAgentSpec("MainAgent", Path(tempfile.mkdtemp()))
        >>> call = ScenarioModelInput(["hello"], model_call_index=1, tool_outputs=[])
        >>> asyncio.run(scripted_reply(spec, call)).text
        'Echo: hello'
    """
    model_call_index, tool_outputs = call.model_call_index, call.tool_outputs
    user_texts = list(call.user_texts)
    last_user_text = user_texts[-1] if user_texts else ""
    spec.invocation_log.record(MODEL_INVOCATION, key=f"call-{model_call_index}")
    spec.invocation_log.record(MODEL_INPUT_INVOCATION, key=json.dumps(user_texts))
    command = ScenarioCommand.from_message(last_user_text)
    suffix = _settings_suffix(session_settings)
    if command is None:
        return ScenarioReply(text=f"Echo: {last_user_text}{suffix}")
    if command.gate_model_call == model_call_index:
        gate = FileGate(spec.state_dir, model_gate_name(model_call_index))
        gate.mark_reached()
        await gate.wait_for_release()
    if model_call_index == 1 and command.calls:
        return ScenarioReply(
            tool_calls=tuple(
                ScenarioToolCall(
                    call.tool,
                    dict(call.arguments) if call.arguments is not None else {"gate": call.gate},
                )
                for call in command.calls
            )
        )
    if command.fail_after_tools:
        raise RuntimeError(MODEL_FAILURE)
    return ScenarioReply(text="done: " + "; ".join(tool_outputs) + suffix)


def _settings_suffix(session_settings: Mapping[str, object] | None) -> str:
    model = (session_settings or {}).get("model")
    return f" [model={model}]" if model is not None else ""


SPEND_REFUSAL_REASON = "the scenario spend budget is used up"
"""The reason ``ScenarioSpendLimit`` refuses a model call with, once ``refuse_model_calls`` ran."""


class ScenarioSpendLimit:
    """A ModelSpendLimit shared by the test and its Worker children through a flag file: it
    refuses every model call while ``refuse_model_calls(state_dir)`` is in effect, and counts
    each reported call once in ``spend-usage.jsonl``.

    The session asks it right before each model call, in the same Step, so it also marks that
    session as the current one (:func:`current_scenario_session`) for the scripted model."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def check_model_call(self, call: ModelCallIdentity) -> ModelSpendRefusal | None:
        # No reset: the mark is meant to outlive this call, for the rest of the Step's task.
        _CURRENT_SESSION.set(call.flow_id)
        if (self._spec.state_dir_of(call.flow_id) / "spend-refused").exists():
            return ModelSpendRefusal(SPEND_REFUSAL_REASON)
        return None

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        state_dir = self._spec.state_dir_of(report.call.flow_id)
        InvocationLog(state_dir / "spend-usage.jsonl").record("usage", key=report.call.usage_key)


def refuse_model_calls(state_dir: Path) -> None:
    """Make every scenario agent's spend limit refuse model calls from now on."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "spend-refused").touch()


class ScenarioToolError(DexAgentsError):
    """Raised by a scenario tool for a failure the model should see; runners map it."""


async def run_scenario_tool(
    spec: ScenarioAgentSpec, tool: str, gate: str, idempotency_key: str
) -> str:
    """The body of every scenario tool: log the call, stop at its gate, answer.

    Raises:
        ScenarioToolError: For the ``broken`` tool; the runner turns it into its
            ToolExecutionError.
    """
    session, separator, _ = idempotency_key.partition("/")
    if separator:  # a tool Step's key, <session>/<turn>/<call>
        with scenario_session(session):
            return await _run_scenario_tool(spec, tool, gate, idempotency_key)
    return await _run_scenario_tool(spec, tool, gate, idempotency_key)


async def _run_scenario_tool(
    spec: ScenarioAgentSpec, tool: str, gate: str, idempotency_key: str
) -> str:
    spec.invocation_log.record(tool, key=idempotency_key)
    ledger = _ledger_write(spec, tool, gate)
    if ledger is _LedgerWrite.BEFORE_GATE:
        spec.invocation_log.record(LEDGER_INVOCATION, key=idempotency_key)
    if gate == KILL_WORKER_GATE:
        # The effect happened; the Worker dies before the Step can report anything after it.
        os.kill(os.getpid(), signal.SIGKILL)
    if gate:
        file_gate = FileGate(spec.state_dir, gate)
        file_gate.mark_reached()
        await file_gate.wait_for_release()
    if tool == "broken":
        raise ScenarioToolError(BROKEN_TOOL_ERROR)
    if ledger is _LedgerWrite.AFTER_GATE:
        spec.invocation_log.record(LEDGER_INVOCATION, key=idempotency_key)
    return scenario_tool_output(tool, gate)


def scenario_tool_output(tool: str, gate: str) -> str:
    """What a scenario tool returns (and a payment's outcome check finds for an applied one)."""
    return f"{tool} {gate or 'ungated'} ok"


class _LedgerWrite(Enum):
    NONE = "none"
    BEFORE_GATE = "before_gate"
    AFTER_GATE = "after_gate"


def _ledger_write(spec: ScenarioAgentSpec, tool: str, gate: str) -> _LedgerWrite:
    """When a tool's write takes effect: only the tools with an outcome check keep a ledger."""
    declared = next((item for item in spec.tools if item.name == tool), None)
    if declared is None or not declared.outcome_check:
        return _LedgerWrite.NONE
    if gate.startswith(APPLIED_GATE_PREFIX):
        return _LedgerWrite.BEFORE_GATE
    return _LedgerWrite.AFTER_GATE
