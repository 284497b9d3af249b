"""Compaction in the session Flow: ``RunModel -> CompactContext(through_sequence) -> RunModel``.

Before each model call of a session with a compaction policy, ``RunModel`` asks the runner for
``estimate_input_tokens(turn)``; at the policy's trigger it asks for
``select_compaction_cutoff(turn, retained_token_budget)``, and a cutoff past the current summary
moves the session to ``CompactContext`` with status ``compacting_context`` and no model call
(:func:`decide_turn_compaction`). ``CompactContext`` calls ``summarize_context`` once, stores the
next ``ContextSummary``, records the call's usage, writes ``compaction_started`` and
``compaction_finished``, applies retention, and moves back to ``RunModel``. It has ``RunModel``'s
timeouts, retries, and failure route (``RecordTurnFailure``), so a crash reruns only the summary
call. A second high estimate finds no new cutoff, so the pair cannot loop.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Final

from dex import Context

from dex_agents._compaction import decide_compaction
from dex_agents._json_values import WireValue, resolve_wire_value_annotations
from dex_agents._runner_contract import AgentTurnContext
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import AGENT_MESSAGE_INDEX, CONTEXT_SUMMARY
from dex_agents._session.runner_facade import RunnerFacade
from dex_agents._values import ContextSummary

__all__ = [
    "CompactContextInput",
    "decide_turn_compaction",
    "summary_of_session",
    "warn_when_messages_were_deleted",
]

_logger: Final = logging.getLogger("dex_agents.session")


@dataclass(frozen=True)
class CompactContextInput(WireValue):
    """``CompactContext``'s input: summarize every message through ``through_sequence``.

    Example:
        >>> CompactContextInput(through_sequence=42).to_json()
        {'through_sequence': 42}
    """

    through_sequence: int


def summary_of_session(context: Context, options: AgentSessionOptions) -> ContextSummary | None:
    """The summary the runner sees: the stored ``ContextSummary`` when the session compacts."""
    if options.compaction is None:
        return None
    return CONTEXT_SUMMARY.get(context)


def warn_when_messages_were_deleted(
    context: Context, runner: RunnerFacade, options: AgentSessionOptions
) -> None:
    """Log a warning when a runner without compaction sees a session with deleted messages.

    Its input starts after them with no summary, such as after the compaction policy was removed.
    """
    if runner.compacts and options.compaction:
        return
    index = AGENT_MESSAGE_INDEX.get(context)
    if index is not None and index.has_deleted_messages:
        _logger.warning(
            "session %s: retention deleted the messages before sequence %d and the runner %s "
            "does not compact, so its model input starts after them with no summary",
            context.flow_id,
            index.first_sequence,
            runner.name,
        )


async def decide_turn_compaction(
    runner: RunnerFacade, options: AgentSessionOptions, turn: AgentTurnContext
) -> int | None:
    """Return the sequence to summarize through before this model call, or ``None``.

    Asks ``estimate_input_tokens(turn)``, and at the trigger
    ``select_compaction_cutoff(turn, retained_token_budget)``; a cutoff that is not past the current
    summary means no compaction, so ``RunModel -> CompactContext`` never loops.

    Raises:
        ConfigurationError: When the runner's estimate is not a non-negative int.
        RunnerContractError: When its cutoff is neither ``None`` nor one of ``turn.messages``.
    """
    policy = options.compaction
    if policy is None or not runner.compacts:
        return None
    return await decide_compaction(
        policy,
        estimated_input_tokens=runner.estimate_input_tokens(turn),
        select_cutoff=functools.partial(runner.select_compaction_cutoff, turn),
        context_summary=turn.context_summary,
        messages=turn.messages,
    )


resolve_wire_value_annotations(__name__)
