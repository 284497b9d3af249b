"""The core's docstring examples run as doctests, and none of them uses an undefined name.

Every module of ``packages/core/src`` is searched with ``doctest``; each docstring's examples run
with the module's globals plus a small prepared namespace (:func:`example_namespace`): the
objects an example would otherwise have to build first, such as a tool call ``record``, a
``turn``, or a Stepwise ``support_agent``. An example that needs a running engine is marked
``# doctest: +SKIP``; :data:`SKIPPED_EXAMPLES` lists those few, and even they are checked for
names that nothing defines.
"""

from __future__ import annotations

import asyncio
import builtins
import doctest
import importlib
import io
import pkgutil
import symtable
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import dex_agents

# Before the module walk imports dex_agents.litellm: LiteLLM must not reach the network.
import litellm_test_support  # noqa: F401
import pytest
from dex_agents import (
    AgentEventWriter,
    AgentMessage,
    AgentSessionFlow,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.stepwise import (
    AgentDefinition,
    FunctionTool,
    ScriptedModelClient,
    ScriptedModelReply,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import EngineLogs, EngineProcess

MODULES: tuple[str, ...] = (
    "dex_agents",
    *sorted(
        module.name for module in pkgutil.walk_packages(dex_agents.__path__, prefix="dex_agents.")
    ),
)

#: The examples that need a running engine or Worker, so they do not run here. Their names are
#: still checked; a new engine example belongs here only when it truly cannot run.
SKIPPED_EXAMPLES: frozenset[str] = frozenset(
    {
        # A Worker child needs a module on disk that builds the Flows (tests/my_worker.py).
        "dex_agents.testing._agent_test_stack.AgentTestStack",
        "dex_agents.testing._worker_process.WorkerProcess",
        # Fixtures and pools of running engines and Worker children (tests-shared runs them).
        "dex_agents.testing.pytest_plugin",
        "dex_agents.testing.pytest_plugin.SharedEngines",
        "dex_agents.testing._worker_pool.WorkerPool",
        # It forks a zygote of the process, which a scenario Worker (tests-shared) does.
        "dex_agents.testing.scenarios._scenario_mcp_zygote.start_scenario_mcp_zygote",
        # 800 turns take minutes; tests-shared/test_context_window.py runs this session.
        "dex_agents.testing._context_window_scenario",
    }
)

#: The modules whose examples talk to an engine: they get ``server_address`` of a shared one.
ENGINE_MODULES: frozenset[str] = frozenset(
    {
        "dex_agents._session.client",
        "dex_agents.testing._flow_attributes",
        "dex_agents.testing._in_process_worker",
        "dex_agents.testing._message_pages",
        "dex_agents.testing._session_prefix",
        "dex_agents.testing._step_history",
        "dex_agents.testing._waiting",
        "dex_agents.ui_stream",
        "dex_agents.ui_stream._agent_event_sse",
        "dex_agents.ui_stream._agent_event_stream_snapshot",
    }
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class EchoRunner:
    """The smallest runner: it answers every turn with the user's last text."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        text = turn.messages[-1].text or ""
        reply = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=text, text=text)
        return TurnCompleted(new_messages=(reply,), usage=AgentUsage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise ToolExecutionError("this agent has no tools")


class _Orders:
    """The application's order store an example's tool reads."""

    async def get(self, order_id: str) -> dict[str, str]:
        return {"order_id": order_id, "status": "delivered"}


class _Payments:
    """The application's payment service an example's write calls, with its idempotency key."""

    async def refund(self, order_id: str, *amount: int, idempotency_key: str) -> str:
        return f"refunded {order_id} ({idempotency_key})"


def _message(sequence: int, role: MessageRole, text: str, turn_id: str) -> AgentMessage:
    return AgentMessage(
        sequence, role, f'{{"text":"{text}"}}', text=text, turn_id=turn_id, created_at=NOW
    )


def _lookup_order_tool() -> FunctionTool:
    orders = _Orders()

    @function_tool(effect=ToolEffect.READ)
    async def lookup_order(order_id: str) -> dict[str, str]:
        """Look up an order by its ID."""
        return await orders.get(order_id)

    return lookup_order


def example_namespace(tmp_path: Path) -> dict[str, object]:
    """The objects the examples start from, besides their module's own globals."""
    record = AgentToolCall(
        "call-1",
        "search",
        '{"query":"open tickets"}',
        ToolEffect.READ,
        False,
        AgentToolCallStatus.APPROVED,
        "turn-1",
        0,
        created_at=NOW,
    )
    messages = (
        _message(1, MessageRole.USER, "Find my open tickets", "turn-1"),
        _message(2, MessageRole.ASSISTANT, "You have two open tickets.", "turn-1"),
        _message(3, MessageRole.USER, "Close the older one", "turn-2"),
    )
    turn = AgentTurnContext(
        flow_id="session-42",
        turn_id="turn-2",
        attempt=1,
        messages=messages,
        framework_run_state=None,
        tool_calls={},
        events=AgentEventWriter.discarding(turn_id="turn-2"),
    )
    lookup_order = _lookup_order_tool()
    support_agent = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=ScriptedModelClient(lambda request: ScriptedModelReply(text="Hello")),
        tools=[lookup_order],
    )
    flow: AgentSessionFlow = stepwise_agent_session_flow(support_agent, flow_type="SupportAgent")
    return {
        "now": NOW,
        "tmp_path": tmp_path,
        "record": record,
        "messages": messages,
        "turn": turn,
        "EchoRunner": EchoRunner,
        "orders": _Orders(),
        "payments": _Payments(),
        "lookup_order": lookup_order,
        "support_agent": support_agent,
        "flow": flow,
    }


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    """One engine for every example that needs one; each example uses its own session IDs."""
    directory = tmp_path_factory.mktemp("doctest-engine")
    started = asyncio.run(
        EngineProcess.start_local(directory / "engine.db", EngineLogs.in_directory(directory))
    )
    try:
        yield started
    finally:
        asyncio.run(started.stop())


def _namespace(
    module_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> dict[str, object]:
    namespace = example_namespace(tmp_path)
    if module_name in ENGINE_MODULES:
        engine_process: EngineProcess = request.getfixturevalue("engine")
        namespace["server_address"] = engine_process.server_address
    return namespace


def _doctests(module_name: str, namespace: dict[str, object]) -> list[doctest.DocTest]:
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return finder.find(module, module_name, globs={**vars(module), **namespace})


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(
    module_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    report = io.StringIO()
    for test in _doctests(module_name, _namespace(module_name, tmp_path, request)):
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def _undefined_names(source: str, defined: set[str]) -> set[str]:
    """The names the examples read that neither they, ``defined``, nor the builtins bind.

    The examples run as one body, like a doctest session, wrapped in an ``async def`` so that an
    example that awaits parses too.
    """
    body = textwrap.indent(source, "    ") or "    pass\n"
    table = symtable.symtable(f"async def __examples__():\n{body}", "<examples>", "exec")
    read: set[str] = set()

    def visit(scope: symtable.SymbolTable) -> None:
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and symbol.is_global():
                read.add(symbol.get_name())
        for child in scope.get_children():
            visit(child)

    visit(table)
    return {name for name in read if name not in defined and not hasattr(builtins, name)}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_use_no_undefined_name(module_name: str, tmp_path: Path) -> None:
    namespace = {**example_namespace(tmp_path), "server_address": "127.0.0.1:0"}
    offenders = {}
    for test in _doctests(module_name, namespace):
        source = "".join(example.source for example in test.examples)
        missing = _undefined_names(source, set(test.globs))
        if missing:
            offenders[test.name] = sorted(missing)
    assert offenders == {}


def test_only_the_listed_examples_are_skipped(tmp_path: Path) -> None:
    namespace = example_namespace(tmp_path)
    skipped = {
        test.name
        for module_name in MODULES
        for test in _doctests(module_name, namespace)
        if any(example.options.get(doctest.SKIP) for example in test.examples)
    }
    assert skipped == SKIPPED_EXAMPLES


def test_the_name_check_sees_an_undefined_name() -> None:
    assert _undefined_names("x = compute(1)\nprint(x)\n", {"print"}) == {"compute"}
    assert _undefined_names("async def f():\n    return await g()\n", set()) == {"g"}
    assert _undefined_names("y = [item for item in range(3)]\n", set()) == set()
