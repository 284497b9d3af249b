"""The reference Claude Agent SDK agent: tools and a scripted model, as one ``ClaudeAgentSdkRunner``.

A Claude Agent SDK agent is its runner (instructions, tools, model) over the real Claude Code CLI;
its scripted model is a route of a :class:`FakeAnthropicServer`. The shared suite's runner (the
scenario and context-window agents) and the benchmark agent (``benchmarks/adapter_agents``) build
their agents here, on one fake server per event loop, instead of each wiring their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from claude_agent_sdk import SdkMcpTool
from dex_agents import ConfigurationError, ToolSource

from dex_agents_claude_agent_sdk._per_event_loop import PerEventLoop
from dex_agents_claude_agent_sdk._runner import ClaudeAgentSdkRunner
from dex_agents_claude_agent_sdk.testing._scripted_model import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelResponder,
)

__all__ = ["reference_runner", "scripted_upstream", "shared_fake_server"]

_SERVERS: Final = PerEventLoop(FakeAnthropicServer, FakeAnthropicServer.start)


async def shared_fake_server() -> FakeAnthropicServer:
    """This event loop's ``FakeAnthropicServer``, started on first use."""
    return await _SERVERS.get()


def scripted_upstream(route: str, respond: FakeModelResponder) -> Callable[[], Awaitable[str]]:
    """The Messages API at which ``respond`` plays the model: route ``route`` of this event loop's
    shared fake server, for a runner's ``upstream_base_url`` (called in each ``RunModel``)."""

    async def base_url() -> str:
        return (await shared_fake_server()).route(route, respond)

    return base_url


def reference_runner(
    respond: FakeModelResponder | None = None,
    tools: Sequence[SdkMcpTool[Any]] = (),
    *,
    instructions: str,
    route: str = "reference",
    model: str | None = None,
    upstream_base_url: Callable[[], Awaitable[str]] | None = None,
    tool_sources: Sequence[ToolSource] = (),
    resolve_model: Callable[[Mapping[str, object]], str | None] | None = None,
) -> ClaudeAgentSdkRunner:
    """A ``ClaudeAgentSdkRunner`` whose model is ``respond`` on the shared fake server (route
    ``route``), or ``upstream_base_url`` when given; the CLI gets ``FAKE_API_KEY_ENVIRONMENT``.

    Raises:
        ConfigurationError: When neither ``respond`` nor ``upstream_base_url`` is given, or from
            ``ClaudeAgentSdkRunner``.

    Example:
        >>> async def respond(request: FakeModelRequest) -> FakeModelReply:
        ...     return FakeModelReply(text=f"Echo: {request.last_user_text}")
        >>> runner = reference_runner(respond, [lookup_order], instructions="Help with orders.")
    """
    if upstream_base_url is None:
        if respond is None:
            raise ConfigurationError("reference_runner needs respond or upstream_base_url")
        upstream_base_url = scripted_upstream(route, respond)
    return ClaudeAgentSdkRunner(
        instructions=instructions,
        tools=tools,
        tool_sources=tool_sources,
        model=model,
        resolve_model=resolve_model,
        upstream_base_url=upstream_base_url,
        env=FAKE_API_KEY_ENVIRONMENT,
    )
