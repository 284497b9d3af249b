"""The GenAI semantic conventions the spans follow: attribute names and what each version keeps.

``V1_42_0_DEV`` (the default) follows the GenAI conventions repository at 1.42.0-dev; ``V1_36_0``
follows OpenTelemetry semantic conventions 1.36.0, whose chat spans name the provider
``gen_ai.system``, have no cache or reasoning token counts, and carry no content (1.36.0 recorded
content as events).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dex_agents._tracing_options import GenAISemanticConventionsVersion

__all__ = [
    "INSTRUMENTATION_NAME",
    "INSTRUMENTATION_VERSION",
    "SemanticConventions",
    "conventions_of",
]

INSTRUMENTATION_NAME: Final = "dex_agents"
"""The instrumentation scope of every span, the tracer name."""
INSTRUMENTATION_VERSION: Final = "0.3.0"

# Attributes on every span.
CONVERSATION_ID: Final = "gen_ai.conversation.id"
SESSION_ID: Final = "session.id"
FLOW_ID: Final = "dex.flow.id"
RUN_ID: Final = "dex.run.id"
STEP_TYPE: Final = "dex.step.type"
STEP_EXECUTION_ID: Final = "dex.step.execution_id"
STEP_ATTEMPT: Final = "dex.step.attempt"
TURN_ID: Final = "dex.agent.turn.id"
OPERATION_NAME: Final = "gen_ai.operation.name"
ERROR_TYPE: Final = "error.type"
# invoke_agent and execute_tool.
AGENT_NAME: Final = "gen_ai.agent.name"
# invoke_agent.
ACTIVATION_TRIGGER: Final = "dex.agent.activation.trigger"
USER_MESSAGE_KEY: Final = "dex.agent.user_message.key"
INTERRUPT_ID: Final = "dex.agent.interrupt.id"
INTERRUPT_APPROVED: Final = "dex.agent.interrupt.approved"
# chat.
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
INPUT_MESSAGES_LAST_KEY: Final = "dex.agent.input_messages.last_key"
OUTPUT_MESSAGES_KEYS: Final = "dex.agent.output_messages.keys"
REQUESTED_TOOL_CALL_IDS: Final = "dex.agent.requested_tool_call.ids"
# execute_tool.
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_EFFECT: Final = "dex.agent.tool.effect"
TOOL_CALL_STATUS: Final = "dex.agent.tool_call.status"
# Set once a lost call's outcome check answered (on CheckToolOutcome's span and on every later
# attempt's span of that call): applied, not_applied, unknown.
TOOL_CALL_OUTCOME_CHECK: Final = "dex.agent.tool_call.outcome_check"
# Content, only with should_capture_message_content and a version that carries it.
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"

INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"


@dataclass(frozen=True)
class SemanticConventions:
    """What one version of the GenAI conventions names and keeps.

    Attributes:
        schema_url: Set on the tracer.
        provider_attribute: The chat span's provider attribute.
        has_detailed_usage: Whether chat spans carry the cache and reasoning token counts.
        carries_content: Whether spans may carry message content at all.
    """

    schema_url: str
    provider_attribute: str
    has_detailed_usage: bool
    carries_content: bool


_CONVENTIONS: Final = {
    GenAISemanticConventionsVersion.V1_42_0_DEV: SemanticConventions(
        schema_url="https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev",
        provider_attribute="gen_ai.provider.name",
        has_detailed_usage=True,
        carries_content=True,
    ),
    GenAISemanticConventionsVersion.V1_36_0: SemanticConventions(
        schema_url="https://opentelemetry.io/schemas/1.36.0",
        provider_attribute="gen_ai.system",
        has_detailed_usage=False,
        carries_content=False,
    ),
}


def conventions_of(version: GenAISemanticConventionsVersion) -> SemanticConventions:
    """Return what ``version`` names and keeps.

    Example:
        >>> conventions_of(GenAISemanticConventionsVersion.V1_36_0).provider_attribute
        'gen_ai.system'
    """
    return _CONVENTIONS[version]
