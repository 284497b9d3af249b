"""The ui_stream helpers serve only sessions of the Flow type they are given.

A browser names the session; an application that authorizes by Flow type must not be led to show
another type's session (or its events) through a route of this one, as ``AgentSessionClient``
refuses it too. Each helper asks Dex for the session's Flow type first: one ``describe_flow`` call
per snapshot read or event stream opened.
"""

from __future__ import annotations

from dex import AsyncClient, Client, FlowInfo

from dex_agents import AgentSessionFlow, SessionFlowTypeError

__all__ = ["require_session_of_flow", "require_session_of_flow_sync"]


async def require_session_of_flow(
    client: AsyncClient, flow: AgentSessionFlow, session_id: str
) -> None:
    """Return when ``session_id`` is a session of ``flow``'s Flow type.

    Raises:
        SessionFlowTypeError: When it is a session of another Flow type (a
            ``FlowNotActiveOrNotFoundError``, so a route answers it like a missing session).
        FlowNotFoundError: When no session has this ID.
    """
    _check_flow_type(await client.describe_flow(session_id), flow, session_id)


def require_session_of_flow_sync(client: Client, flow: AgentSessionFlow, session_id: str) -> None:
    """:func:`require_session_of_flow` with a synchronous ``Client``."""
    _check_flow_type(client.describe_flow(session_id), flow, session_id)


def _check_flow_type(info: FlowInfo, flow: AgentSessionFlow, session_id: str) -> None:
    expected = flow.get_flow_type()
    if info.flow_type != expected:
        raise SessionFlowTypeError(session_id, expected, info.flow_type)
