"""Flows whose Steps fail, for history tests through the engine.

``RetryFlow`` (input: a label): ``Flaky`` raises on its first attempt and moves to ``Finish`` on
its second (retry after one second); ``Finish`` completes with ``"<label>:done"``.
``StuckFlow`` (input: a label): ``Stuck`` raises on every attempt (retried every second,
without end), so the Flow never moves on; its fourth attempt first passes the gate
``STUCK_FOURTH_ATTEMPT_GATE``, so a test knows the first three failures are recorded.

Registry spec for Worker child processes: ``history_sample_flows:retry_registry``.
"""

from __future__ import annotations

from datetime import timedelta

import dex
from dex import Context, Flow, Registry, RetryPolicy, Step, StepDecision, StepList, StepOptions
from engine_test_support import pass_gate

RETRY_REGISTRY = "history_sample_flows:retry_registry"
STUCK_FOURTH_ATTEMPT_GATE = "stuck.fourth-attempt"


class Flaky(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        if context.attempt < 2:
            raise RuntimeError(f"{input}: first attempt fails")
        return dex.go_to(Finish, input)


class Finish(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return dex.graceful_complete(f"{input}:done")


class RetryFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Flaky()).other_steps(Finish())


class Stuck(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1), backoff_coefficient=1.0
            )
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        if context.attempt == 4:
            pass_gate(STUCK_FOURTH_ATTEMPT_GATE)
        raise RuntimeError(f"{input}: the ledger is locked (attempt {context.attempt})")


class StuckFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Stuck())


def retry_registry() -> Registry:
    return Registry([RetryFlow(), StuckFlow()])
