"""AgentSessionClient's own logic: argument checks and the lock-conflict retry of resolve_interrupt."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import dex_agents._session.client as client_module
import grpc
import pytest
from agent_session_test_support import NeverRunRunner
from dex import (
    ActiveStepSearchMode,
    AsyncClient,
    ErrorSubStatus,
    Flow,
    FlowInfo,
    FlowStatus,
    IdReusePolicy,
    RpcLockConflictError,
    StartFlowOptions,
)
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    ConfigurationTypeError,
    ResolveInterruptRequest,
)


class _ConflictingClient:
    """Answers invoke_rpc with ``conflicts`` lock conflicts, then True; records every request."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.requests: list[object] = []

    async def invoke_rpc(self, method: object, flow_id: str, request: object) -> bool:
        self.requests.append(request)
        if len(self.requests) <= self.conflicts:
            raise RpcLockConflictError(
                grpc.StatusCode.ABORTED,
                ErrorSubStatus.WORKER_API_ERROR,
                "PENDING_INTERRUPTS is locked",
                "invoke_rpc",
                flow_id,
            )
        return True

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        # The client checks each session's Flow type once before its first RPC.
        return FlowInfo(flow_id, "run-1", "ClientTest", FlowStatus.RUNNING, datetime.now(UTC))


def _sessions(client: _ConflictingClient) -> AgentSessionClient:
    flow = AgentSessionFlow(NeverRunRunner(), flow_type="ClientTest")
    return AgentSessionClient(cast(AsyncClient, client), flow)


async def test_resolve_interrupt_retries_lock_conflicts() -> None:
    client = _ConflictingClient(conflicts=3)
    assert await _sessions(client).resolve_interrupt(
        "s1", "c1", approved=False, rejection_message="no"
    )
    assert client.requests == [ResolveInterruptRequest("c1", False, "no")] * 4


async def test_resolve_interrupt_gives_up_after_the_retry_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "LOCK_CONFLICT_RETRY_SECONDS", 0.2)
    client = _ConflictingClient(conflicts=1_000)
    with pytest.raises(RpcLockConflictError):
        await _sessions(client).resolve_interrupt("s1", "c1", approved=True)
    assert 1 < len(client.requests) < 1_000


def test_client_refuses_a_flow_that_is_not_a_session_flow() -> None:
    with pytest.raises(ConfigurationTypeError, match="AgentSessionFlow"):
        AgentSessionClient(cast(AsyncClient, object()), cast(Flow[Any], object()))


def test_a_session_id_is_never_reused_unless_the_caller_asks() -> None:
    """Dex's DEFAULT ID reuse policy would start a closed session's ID afresh."""

    def policy(options: StartFlowOptions | None) -> IdReusePolicy:
        flow = AgentSessionFlow(NeverRunRunner(), flow_type="ClientTest")
        _, start = client_module.session_start_arguments(
            "s-1", "", None, ActiveStepSearchMode.WITH_WAIT_FOR, options, False, flow
        )
        return start.id_reuse_policy

    assert policy(None) is IdReusePolicy.DISALLOW
    assert policy(StartFlowOptions()) is IdReusePolicy.DISALLOW
    chosen = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING)
    assert policy(chosen) is IdReusePolicy.ALLOW_IF_NOT_RUNNING
