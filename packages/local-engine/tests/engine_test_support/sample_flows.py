"""Flows for engine tests, with gates and invocation records at every interesting point.

``ProbeFlow`` (Flow type ``"ProbeFlow"``, start Step ``ProbeStep``, input: a label string):

1. records ``ProbeStep.start`` and passes gate ``<label>.before-output``;
2. sends a heartbeat ``{"label": <label>, "progress": 1}`` and writes ``"<label>:chunk"`` to the
   Stream ``probe-output``;
3. passes gate ``<label>.after-output``, records ``ProbeStep.done`` and completes the Flow with
   ``"<label>:done"``.

Its RPC ``echo(value)`` records ``ProbeFlow.echo``, passes gate ``<value>.rpc`` and answers
``"echo:<value>"``. Registries (for ``WorkerLauncher.start``):

- ``engine_test_support.sample_flows:probe_registry`` - sync handlers (``dex.Worker``);
- ``engine_test_support.sample_flows:async_probe_registry`` - async handlers (``dex.AsyncWorker``);
- ``engine_test_support.sample_flows:stepless_probe_registry`` - a ``ProbeFlow`` without
  ``ProbeStep`` and without ``echo`` (its Worker rejects both as unknown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator

import dex
from dex import (
    AsyncContext,
    Context,
    Flow,
    PersistenceSchema,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    Stream,
)

from engine_test_support.gates import pass_gate
from engine_test_support.invocation_log import record_invocation

PROBE_FLOW_TYPE = "ProbeFlow"
PROBE_STEP_TYPE = "ProbeStep"
PROBE_STREAM_NAME = "probe-output"


def _probe_stream() -> Stream[str]:
    return Stream(PROBE_STREAM_NAME, str, 1 << 20)


def _heartbeat_value(label: str) -> dict[str, str | int]:
    return {"label": label, "progress": 1}


class ProbeStep(Step[str]):
    """Sync probe Step; see the module docstring."""

    def __init__(self, stream: Stream[str]) -> None:
        self._stream = stream

    def execute(self, context: Context, input: str) -> Generator[StepOutput, None, StepDecision]:
        record_invocation("ProbeStep.start", label=input, attempt=context.attempt)
        pass_gate(f"{input}.before-output")
        yield dex.heartbeat(_heartbeat_value(input))
        yield self._stream.write(context, f"{input}:chunk")
        pass_gate(f"{input}.after-output")
        record_invocation("ProbeStep.done", label=input, attempt=context.attempt)
        return dex.graceful_complete(f"{input}:done")


class AsyncProbeStep(Step[str]):
    """Async probe Step with the same behaviour as :class:`ProbeStep`."""

    def __init__(self, stream: Stream[str]) -> None:
        self._stream = stream

    def get_step_type(self) -> str:
        return PROBE_STEP_TYPE

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record_invocation("ProbeStep.start", label=input, attempt=context.attempt)
        await asyncio.to_thread(pass_gate, f"{input}.before-output")
        await context.heartbeat(_heartbeat_value(input))
        self._stream.write(context, f"{input}:chunk")
        try:
            await asyncio.to_thread(pass_gate, f"{input}.after-output")
        except asyncio.CancelledError:
            # Tests wait for this entry to know the cancellation reached the handler.
            record_invocation("ProbeStep.cancelled", label=input, attempt=context.attempt)
            raise
        record_invocation("ProbeStep.done", label=input, attempt=context.attempt)
        return dex.graceful_complete(f"{input}:done")


class ProbeFlow(Flow[str]):
    """Sync probe Flow; see the module docstring."""

    def __init__(self) -> None:
        self._stream = _probe_stream()

    def get_flow_type(self) -> str:
        return PROBE_FLOW_TYPE

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(ProbeStep(self._stream))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self._stream)

    @dex.rpc
    def echo(self, context: Context, value: str) -> RPCResult[str]:
        record_invocation("ProbeFlow.echo", value=value)
        pass_gate(f"{value}.rpc")
        return RPCResult(f"echo:{value}")


class AsyncProbeFlow(ProbeFlow):
    """Async probe Flow (same Flow type, Step type and RPC as :class:`ProbeFlow`)."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(AsyncProbeStep(self._stream))


class _Idle(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        del context, input
        return dex.dead_end()


class StepLessProbeFlow(Flow[str]):
    """A ``ProbeFlow`` that knows neither ``ProbeStep`` nor ``echo``."""

    def get_flow_type(self) -> str:
        return PROBE_FLOW_TYPE

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(_Idle())


def probe_registry() -> Registry:
    return Registry([ProbeFlow()])


def async_probe_registry() -> Registry:
    return Registry([AsyncProbeFlow()], allow_async_handlers=True)


def stepless_probe_registry() -> Registry:
    return Registry([StepLessProbeFlow()])


PROBE_REGISTRY = "engine_test_support.sample_flows:probe_registry"
ASYNC_PROBE_REGISTRY = "engine_test_support.sample_flows:async_probe_registry"
STEPLESS_PROBE_REGISTRY = "engine_test_support.sample_flows:stepless_probe_registry"
