"""A two-Step Flow whose first Step fails once, for history tests through the engine.

``RetryFlow`` (input: a label): ``Flaky`` raises on its first attempt and moves to ``Finish`` on
its second (retry after one second); ``Finish`` completes with ``"<label>:done"``.

Registry spec for Worker child processes: ``history_sample_flows:retry_registry``.
"""

from __future__ import annotations

from datetime import timedelta

import dex
from dex import Context, Flow, Registry, RetryPolicy, Step, StepDecision, StepList, StepOptions

RETRY_REGISTRY = "history_sample_flows:retry_registry"


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


def retry_registry() -> Registry:
    return Registry([RetryFlow()])
