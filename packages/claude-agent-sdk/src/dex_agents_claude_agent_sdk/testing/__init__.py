"""``dex_agents_claude_agent_sdk.testing``: a local Anthropic Messages API whose replies come from a
function, and the shared suite's runner.

:class:`FakeAnthropicServer` answers ``POST /v1/messages`` (streaming) on the loopback interface
with a function of the request, so an agent runs through the real Claude Code CLI and the real
relay while a script plays the model (no key, no network); :func:`reference_runner` is the one
agent of tools and such a model (on :func:`shared_fake_server`), which the suite's runner and the
benchmark agent build. :data:`SCENARIO_RUNNER` builds the
shared scenario agent (the package's entry point ``claude-agent-sdk`` in the group
``dex_agents.scenario_runners``); it and ``ClaudeAgentSdkScenarioRunner`` are imported on first
use, so the fake server alone needs no ``dex_agents.testing``.

Example:
    >>> async def respond(request: FakeModelRequest) -> FakeModelReply:
    ...     return FakeModelReply(text=f"Echo: {request.last_user_text}")
    >>> server = FakeAnthropicServer()
    >>> await server.start()
    >>> runner = ClaudeAgentSdkRunner(instructions="...", upstream_base_url=server.route("demo", respond),
    ...                               env=FAKE_API_KEY_ENVIRONMENT)
"""

from dex_agents.adapters import scenario_runner_getattr

from dex_agents_claude_agent_sdk.testing._reference_agent import (
    reference_runner,
    scripted_upstream,
    shared_fake_server,
)
from dex_agents_claude_agent_sdk.testing._scripted_model import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelReply,
    FakeModelRequest,
    FakeModelResponder,
    FakeToolCall,
)

__all__ = [
    "FAKE_API_KEY_ENVIRONMENT",
    "SCENARIO_RUNNER",
    "ClaudeAgentSdkScenarioRunner",
    "FakeAnthropicServer",
    "FakeModelReply",
    "FakeModelRequest",
    "FakeModelResponder",
    "FakeToolCall",
    "reference_runner",
    "scripted_upstream",
    "shared_fake_server",
]


# SCENARIO_RUNNER and the runner class on first use: the scenario runner imports dex_agents.testing.
__getattr__ = scenario_runner_getattr(__name__, "ClaudeAgentSdkScenarioRunner")
