"""Spend limits: the protocol, its values, and the helpers the session uses."""

from __future__ import annotations

import pytest
from dex_agents import (
    MODEL_SPEND_LIMIT_ERROR_PREFIX,
    AgentUsage,
    ConfigurationError,
    ConfigurationTypeError,
    ModelCallIdentity,
    ModelCallKind,
    ModelSpendLimit,
    ModelSpendRefusal,
    ModelSpendReport,
)
from dex_agents._spend_limit import (
    check_model_spend,
    model_spend_limit_error,
)


class _TokenBudget:
    """An application limit: a token budget per account, shared by sessions."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used: dict[str, int] = {}
        self.checked: list[ModelCallIdentity] = []

    async def check_model_call(self, call: ModelCallIdentity) -> ModelSpendRefusal | None:
        self.checked.append(call)
        if sum(self.used.values()) >= self.budget:
            return ModelSpendRefusal(f"account used its {self.budget} tokens")
        return None

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        # Keyed, so a report repeated after a crash counts once.
        self.used[report.call.usage_key] = report.usage.total_tokens


class _Broken:
    async def check_model_call(self, call: ModelCallIdentity) -> object:
        return "no"

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        return None


def _call(attempt: int = 1, kind: ModelCallKind = ModelCallKind.TURN) -> ModelCallIdentity:
    return ModelCallIdentity(
        flow_type="SupportAgent",
        flow_id="session-42",
        turn_id="turn-3",
        step_execution_id="RunModel-7",
        attempt=attempt,
        kind=kind,
        session_settings={"model": "gpt-5"},
    )


def test_an_application_class_is_a_spend_limit() -> None:
    assert isinstance(_TokenBudget(10), ModelSpendLimit)
    assert not isinstance(object(), ModelSpendLimit)


async def test_without_a_limit_every_call_is_allowed() -> None:
    assert await check_model_spend(None, _call()) is None


async def test_a_limit_allows_then_refuses_once_usage_reaches_the_budget() -> None:
    limit = _TokenBudget(100)
    assert await check_model_spend(limit, _call()) is None
    await limit.record_model_usage(
        ModelSpendReport(_call(), AgentUsage(input_tokens=80, output_tokens=20))
    )
    refusal = await check_model_spend(limit, _call(attempt=2))
    assert refusal == ModelSpendRefusal("account used its 100 tokens")
    assert [call.attempt for call in limit.checked] == [1, 2]


async def test_a_repeated_report_counts_once_by_usage_key() -> None:
    limit = _TokenBudget(100)
    report = ModelSpendReport(_call(), AgentUsage(input_tokens=30))
    await limit.record_model_usage(report)
    await limit.record_model_usage(report)
    assert sum(limit.used.values()) == 30
    assert _call().usage_key == "session-42/turn-3/RunModel-7/1"
    assert _call(attempt=2).usage_key != _call().usage_key


async def test_a_limit_that_returns_something_else_is_a_type_error() -> None:
    with pytest.raises(
        ConfigurationTypeError, match="must return None or a ModelSpendRefusal, got str"
    ):
        await check_model_spend(_Broken(), _call())  # type: ignore[arg-type]


def test_a_refusal_needs_a_reason_and_becomes_the_turn_error() -> None:
    for blank in ("", "  "):
        with pytest.raises(ConfigurationError, match="must not be blank"):
            ModelSpendRefusal(blank)
    error = model_spend_limit_error(ModelSpendRefusal("over budget"))
    assert error == "the model spend limit refused the model call: over budget"
    assert error.startswith(MODEL_SPEND_LIMIT_ERROR_PREFIX)


def test_call_kinds_name_the_step() -> None:
    assert [kind.value for kind in ModelCallKind] == ["turn", "context_summary"]
    assert _call(kind=ModelCallKind.CONTEXT_SUMMARY).kind is ModelCallKind.CONTEXT_SUMMARY
    assert ModelCallIdentity("T", "s", "turn-1", "RunModel-1", 1).session_settings == {}
