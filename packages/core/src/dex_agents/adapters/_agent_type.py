"""The one error every runner raises when it is given an agent of another framework's type."""

from __future__ import annotations

from dex_agents.exceptions import ConfigurationTypeError

__all__ = ["agent_type_error"]


def agent_type_error(runner: str, expected: str, agent: object) -> ConfigurationTypeError:
    """The error to raise when a runner is given an agent it cannot run.

    A wrong type is a ``ConfigurationTypeError`` (a ``TypeError``) in every runner, worded alike.

    Example:
        >>> str(agent_type_error("PydanticAIRunner", "a pydantic_ai.Agent", "gpt"))
        'PydanticAIRunner needs a pydantic_ai.Agent, got str'
    """
    return ConfigurationTypeError(f"{runner} needs {expected}, got {type(agent).__name__}")
