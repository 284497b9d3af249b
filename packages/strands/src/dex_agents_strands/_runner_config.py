"""What every Step of a Strands session needs from the runner's arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dex_agents import ConfigurationError, ConfigurationTypeError
from dex_agents.adapters import agent_type_error
from strands import Agent
from strands.models import Model

__all__ = ["ModelResolver", "RunnerConfig"]

ModelResolver = Callable[[Mapping[str, object]], Model]
"""Maps a turn's session settings to the Strands ``Model`` of its calls."""


@dataclass(frozen=True)
class RunnerConfig:
    """The agent and how to run it; shared by the model, tool and summary Steps."""

    agent: Agent
    resolve_model: ModelResolver | None

    def __post_init__(self) -> None:
        if not isinstance(self.agent, Agent):
            raise agent_type_error("StrandsRunner", "a strands.Agent", self.agent)
        if self.resolve_model is not None and not callable(self.resolve_model):
            raise ConfigurationError(
                f"StrandsRunner resolve_model must be callable, got {self.resolve_model!r}"
            )

    def model_for(self, settings: Mapping[str, object]) -> Model:
        """The model of a call with these session settings: ``resolve_model``'s, else the agent's.

        Raises:
            ConfigurationTypeError: When ``resolve_model`` returns no Strands ``Model``.
        """
        if self.resolve_model is None:
            return self.agent.model
        model: Any = self.resolve_model(settings)
        if not isinstance(model, Model):
            raise ConfigurationTypeError(
                f"resolve_model returned {type(model).__name__}, not a strands.models.Model"
            )
        return model
