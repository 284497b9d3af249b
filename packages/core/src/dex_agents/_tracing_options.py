"""Tracing options of an agent session Flow type: ``AgentTracingOptions``.

The documented options are accepted and validated so that an application written for a release
that emits OpenTelemetry spans runs unchanged. This release emits no spans and never imports
OpenTelemetry, whatever the options say; ``AgentSessionOptions.tracing`` carries them for the
release that does.

Example:
    >>> options = AgentTracingOptions(agent_name="Triage", should_capture_message_content=False)
    >>> options.semantic_conventions_version
    <GenAISemanticConventionsVersion.V1_42_0_DEV: '1.42.0-dev'>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = ["AgentTracingOptions", "GenAISemanticConventionsVersion"]


class GenAISemanticConventionsVersion(StrEnum):
    """The version of the OpenTelemetry GenAI semantic conventions that spans follow."""

    #: The default: GenAI semantic conventions 1.42.0-dev.
    V1_42_0_DEV = "1.42.0-dev"
    #: OpenTelemetry semantic conventions 1.36.0, for backends that read the older names.
    V1_36_0 = "1.36.0"


@dataclass(frozen=True)
class AgentTracingOptions:
    """How an agent session Flow type traces its Steps; pass it as ``AgentSessionOptions.tracing``.

    Attributes:
        is_enabled: ``False`` emits nothing and never imports OpenTelemetry.
        tracer_provider: The OpenTelemetry tracer provider to emit with; ``None`` uses the global
            provider. Typed ``object`` so this module never imports OpenTelemetry.
        agent_name: ``gen_ai.agent.name`` and the ``invoke_agent`` span name; ``None`` uses the
            Flow type.
        should_capture_message_content: Put message text, tool arguments, and tool results on
            spans.
        semantic_conventions_version: The GenAI semantic conventions the spans follow.

    Raises:
        ConfigurationTypeError: When a flag is not a bool, ``agent_name`` is not a string or ``None``, or the
            version is not a ``GenAISemanticConventionsVersion`` value.
        ConfigurationError: When ``agent_name`` is blank.

    Example:
        >>> AgentTracingOptions(is_enabled=False).is_enabled
        False
    """

    is_enabled: bool = True
    tracer_provider: object | None = None
    agent_name: str | None = None
    should_capture_message_content: bool = False
    semantic_conventions_version: GenAISemanticConventionsVersion = (
        GenAISemanticConventionsVersion.V1_42_0_DEV
    )

    def __post_init__(self) -> None:
        for name in ("is_enabled", "should_capture_message_content"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigurationTypeError(
                    f"AgentTracingOptions.{name} must be a bool, got {value!r}"
                )
        if self.agent_name is not None:
            if not isinstance(self.agent_name, str):
                raise ConfigurationTypeError(
                    f"AgentTracingOptions.agent_name must be a str or None, got {self.agent_name!r}"
                )
            if not self.agent_name.strip():
                raise ConfigurationError("AgentTracingOptions.agent_name must not be blank")
        try:
            version = GenAISemanticConventionsVersion(self.semantic_conventions_version)
        except ValueError:
            raise ConfigurationTypeError(
                "AgentTracingOptions.semantic_conventions_version must be a "
                f"GenAISemanticConventionsVersion, got {self.semantic_conventions_version!r}"
            ) from None
        object.__setattr__(self, "semantic_conventions_version", version)
