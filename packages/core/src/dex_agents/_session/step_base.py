"""``SessionStep``: the one base of every Step of the agent session Flow.

Every session Step is async, holds the Flow's :class:`~dex_agents._session.runtime.SessionRuntime`
(the runner facade, options, AgentEvents Stream and movements), and reaches other Steps only
through ``runtime.movements``, so no Step module imports another. A Step whose input is a tool
call ID returns ``None`` from ``get_step_options``: every movement to it carries the options of its
own record.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Generic, TypeVar

from dex import AsyncContext, Step, StepDecision

from dex_agents._session.runtime import SessionRuntime

__all__ = ["SessionStep"]

InputT = TypeVar("InputT")


class SessionStep(Step[InputT], Generic[InputT]):
    """An async Step of the session Flow, built with the Flow's runtime.

    Args:
        runtime: What every Step of one ``AgentSessionFlow`` shares.
    """

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    @abstractmethod
    async def execute(self, context: AsyncContext, input: InputT) -> StepDecision:  # type: ignore[override]
        """Run the Step's attempt and decide what comes next."""
