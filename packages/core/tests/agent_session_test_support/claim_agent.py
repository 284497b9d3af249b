"""The session Flow of the start-claim tests: one single-attempt ``refund`` call whose first start
claim waits at a gate in the Worker child before it is sent, so a test can SIGKILL the Worker or
the engine after the task reached the Worker but before the tool started.

The Flow wraps the Worker's Dex client (``use_worker_client``): every ``claim_tool_attempt``
claim it sends is logged with the answer (``claims.log``), and the first one waits at the
``claim`` gate first. The state directory comes from ``AGENT_SESSION_TEST_STATE_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, cast

from dex import AsyncClient
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.testing import FileGate, InvocationLog

from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    tool_call,
)
from agent_session_test_support.crash_agent import STATE_DIR_ENV

CLAIM_FLOW_TYPE = "ClaimTestAgent"
CLAIM_GATE = "claim"
REFUND_GATE = "refund"
CLAIM_SENT = "sent"
GATES_REFUND_ENV = "CLAIM_TEST_GATES_REFUND"
"""Set to ``1`` in the Worker's environment to hold the refund tool at its gate once started."""
LOSES_CLAIM_ANSWER_ENV = "CLAIM_TEST_LOSES_CLAIM_ANSWER"
"""Set to ``1`` to drop the first claim's answer after Dex took the claim (no claim gate)."""


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def tool_log(state_dir: Path | None = None) -> InvocationLog:
    """Every real start of the refund tool, keyed by idempotency key."""
    return InvocationLog((state_dir or _state_dir()) / "tools.log")


def claim_log(state_dir: Path | None = None) -> InvocationLog:
    """Every claim the Worker sent (see :class:`ClaimObservingClient`)."""
    return InvocationLog((state_dir or _state_dir()) / "claims.log")


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "refund-1", "refund", {"order": 7}))
    return final_answer_with_results(turn)


async def _refund(call: DeferredToolExecution) -> ToolExecutionResult:
    tool_log().record("refund", key=call.idempotency_key)
    if os.environ.get(GATES_REFUND_ENV) == "1":
        gate = FileGate(_state_dir(), REFUND_GATE)
        gate.mark_reached()
        await gate.wait_for_release()
    return ToolExecutionResult("refund done")


class ClaimObservingClient:
    """A Worker's Dex client that logs every claim it sends (``claims.log``, key
    ``<flow_id>/<tool_call_id>``: name ``sent`` before it goes, then its answer, ``granted`` or
    ``refused``) and, given ``gate``, holds the first claim at it before sending it. With
    ``loses_first_answer`` the first claim's answer is dropped after Dex took the claim."""

    def __init__(
        self,
        client: AsyncClient,
        state_dir: Path,
        gate: FileGate | None = None,
        *,
        loses_first_answer: bool = False,
    ) -> None:
        self._client = client
        self._state_dir = state_dir
        self._gate = gate
        self._loses_first_answer = loses_first_answer

    async def invoke_rpc(self, rpc_method: Any, flow_id: str, input: Any, **options: Any) -> Any:
        if json.loads(input)["action"] != "claim":
            return await self._client.invoke_rpc(rpc_method, flow_id, input, **options)
        gate = self._gate
        if gate is None or gate.reached_count > 0:
            return await self._claim(rpc_method, flow_id, input, **options)
        gate.mark_reached()
        # Sent once the gate opens even if the Step is cancelled meanwhile (the SDK cancels a
        # Step whose task stream broke): a claim that reaches Dex late, as a slow network would.
        late = asyncio.ensure_future(self._gated_claim(gate, rpc_method, flow_id, input, options))
        _LATE_CLAIMS.add(late)
        late.add_done_callback(_LATE_CLAIMS.discard)
        return await asyncio.shield(late)

    async def _gated_claim(
        self, gate: FileGate, rpc_method: Any, flow_id: str, input: Any, options: dict[str, Any]
    ) -> Any:
        await gate.wait_for_release()
        return await self._claim(rpc_method, flow_id, input, **options)

    async def _claim(self, rpc_method: Any, flow_id: str, input: Any, **options: Any) -> Any:
        key = f"{flow_id}/{json.loads(input)['call']}"
        log = claim_log(self._state_dir)
        # Logged before it leaves: Dex may commit a claim whose answer never comes back.
        log.record(CLAIM_SENT, key=key)
        output = await self._client.invoke_rpc(rpc_method, flow_id, input, **options)
        log.record(json.loads(output)["answer"], key=key)
        if self._loses_first_answer and len(claim_log(self._state_dir).keys(CLAIM_SENT)) == 1:
            # Dex took the claim, and its answer is lost on the way back.
            raise ConnectionResetError("the claim's answer was lost on the way back")
        return output


_LATE_CLAIMS: set[asyncio.Future[Any]] = set()


def claim_answers(state_dir: Path) -> list[str]:
    """The answers of every logged claim, in order."""
    return [record.name for record in claim_log(state_dir).records() if record.name != CLAIM_SENT]


class ClaimTestFlow(AgentSessionFlow):
    """The test's session Flow: its Worker client goes through :class:`ClaimObservingClient`,
    which holds the first claim at the ``claim`` gate."""

    def use_worker_client(self, client: AsyncClient) -> None:
        super().use_worker_client(cast(AsyncClient, _TestClaimClient(client)))


class _TestClaimClient:
    """The test Worker's client: a :class:`ClaimObservingClient` set up from the environment at
    the first call (a pooled Worker child gets the test's environment after it started)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._observing: ClaimObservingClient | None = None

    async def invoke_rpc(self, rpc_method: Any, flow_id: str, input: Any, **options: Any) -> Any:
        if self._observing is None:
            loses = os.environ.get(LOSES_CLAIM_ANSWER_ENV) == "1"
            gate = None if loses else FileGate(_state_dir(), CLAIM_GATE)
            self._observing = ClaimObservingClient(
                self._client, _state_dir(), gate, loses_first_answer=loses
            )
        return await self._observing.invoke_rpc(rpc_method, flow_id, input, **options)


def build_claim_flow() -> ClaimTestFlow:
    """The Flow both the test's Client and the Worker children register."""
    options = AgentSessionOptions(
        tool_policies={
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
        }
    )
    runner = ScriptedRunner(_script, {"refund": _refund})
    return ClaimTestFlow(runner, flow_type=CLAIM_FLOW_TYPE, options=options)
