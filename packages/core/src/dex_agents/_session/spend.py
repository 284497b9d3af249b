"""The spend limit in the session Flow: asked before each model call, told what it used.

``RunModel`` and ``CompactContext`` each make one model call per attempt; both ask the Flow type's
``ModelSpendLimit`` first, end the turn without the call when it refuses, and report the call's
usage after it returned.
"""

from __future__ import annotations

from collections.abc import Mapping

from dex import Context

from dex_agents._session.runtime import SessionRuntime
from dex_agents._spend_limit import (
    ModelCallIdentity,
    ModelCallKind,
    ModelSpendReport,
    check_model_spend,
    model_spend_limit_error,
)
from dex_agents._values import AgentUsage

__all__ = ["model_call_identity", "refused_model_call_error", "report_model_spend"]


def model_call_identity(
    context: Context,
    runtime: SessionRuntime,
    turn_id: str,
    session_settings: Mapping[str, object],
    kind: ModelCallKind,
) -> ModelCallIdentity:
    """Return the identity of the model call this Step attempt makes, for the spend limit."""
    return ModelCallIdentity(
        flow_type=runtime.flow_type,
        flow_id=context.flow_id,
        turn_id=turn_id,
        step_execution_id=context.step_execution_id,
        attempt=max(context.attempt, 1),
        kind=kind,
        session_settings=session_settings,
    )


async def refused_model_call_error(runtime: SessionRuntime, call: ModelCallIdentity) -> str | None:
    """Ask the spend limit about ``call``; the turn's ``last_turn_error`` when it refuses.

    Raises:
        ConfigurationTypeError: When the limit returns something other than ``None`` or a refusal.
    """
    refusal = await check_model_spend(runtime.options.model_spend_limit, call)
    return model_spend_limit_error(refusal) if refusal is not None else None


async def report_model_spend(
    runtime: SessionRuntime, call: ModelCallIdentity, usage: object
) -> None:
    """Tell the spend limit, when there is one, what the model call used."""
    limit = runtime.options.model_spend_limit
    if limit is not None and isinstance(usage, AgentUsage):
        await limit.record_model_usage(ModelSpendReport(call=call, usage=usage))
