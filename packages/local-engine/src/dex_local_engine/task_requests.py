"""The requests the engine sends to Workers: a Step method's or an RPC's context and loaded state.

A request carries the Flow's Attributes (AttributeMap instances only when loaded), the size of
every Channel, and the pending messages of the loaded Channels. Large values in it travel as blob
references (:mod:`dex_local_engine.blob_values`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.blob_values import BlobStore
from dex_local_engine.conditions import SubFlowResults, condition_results
from dex_local_engine.dispatch import TaskRequest
from dex_local_engine.flow_state import FlowRun, MethodKind, StepExecution
from dex_local_engine.wire_values import ensure_value

__all__ = ["MethodTask", "method_request", "rpc_request"]


@dataclass(frozen=True)
class MethodTask:
    """A Step method's Worker request and its serialized size, measured once: every size is a walk
    of the whole request, which late in a session holds the whole transcript."""

    request: TaskRequest
    size_bytes: int


_StateRequest = (
    pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
)
"""A Worker request that carries the Flow's loaded state."""


class _Selectors:
    """Attribute map or Channel map selectors: exact instance keys and ``<map>/`` prefixes."""

    def __init__(self, selectors: Iterable[str]) -> None:
        self._exact: set[str] = set()
        prefixes: set[str] = set()
        for selector in selectors:
            (prefixes if selector.endswith("/") else self._exact).add(selector)
        # A name is in a map when a prefix of it that ends in "/" is selected: it starts with it.
        self._prefixes = tuple(prefixes)

    def select(self, name: str) -> bool:
        return name in self._exact or name.startswith(self._prefixes)


def _step_context(run: FlowRun, step: StepExecution) -> pb.Context:
    context = pb.Context(
        flow_id=run.flow_id,
        run_id=run.run_id,
        flow_started_timestamp=int(run.started_at),
        step_execution_id=step.step_execution_id,
        first_attempt_timestamp=int(step.first_attempt_at),
        attempt=step.attempt,
        from_step_execution_id=step.from_step_execution_id,
        run_attempt=run.run_attempt,
    )
    if step.recovery_error is not None:
        context.recovery_error.CopyFrom(step.recovery_error)
    if step.last_heartbeat is not None:
        context.last_heartbeat_value.CopyFrom(step.last_heartbeat)
    return context


def _load_state(
    request: _StateRequest,
    run: FlowRun,
    attribute_maps: Sequence[str],
    channel_names: Sequence[str],
    channel_maps: Sequence[str],
) -> None:
    """Fill ``request`` with the run's Attributes (AttributeMap instances only when selected), the
    size of every Channel and the messages of the loaded ones.

    Each value is copied into the request once, in place: building a ``KV`` per Attribute and then
    the request from them copied every value twice, which late in a session (hundreds of
    transcript instances in every task that loads them) was a tenth of the engine's CPU a turn.
    """
    selected = _Selectors(attribute_maps).select
    add_attribute = request.attributes.add
    for key, value in run.attributes.items():
        if "/" not in key or selected(key):
            entry = add_attribute()
            entry.key = key
            entry.value.CopyFrom(value)
    channel_map_selectors = _Selectors(channel_maps)
    for name, queue in run.channels.items():
        if not queue:
            continue
        request.channel_infos[name].size = len(queue)
        if name in channel_names or channel_map_selectors.select(name):
            request.loaded_channel_messages[name].messages.extend(queue)
    request.loaded_attribute_map_instances.extend(attribute_maps)
    request.loaded_channel_names.extend(channel_names)
    request.loaded_channel_map_instances.extend(channel_maps)


def method_request(
    run: FlowRun, step: StepExecution, sub_flow_results: SubFlowResults, blobs: BlobStore
) -> MethodTask:
    """The request for the current method (``wait_for`` or ``execute``) of ``step``, with large
    values as blob references, and its size.

    Example::

        task = method_request(run, step, engine_sub_flow_result, blobs)
    """
    options = step.options
    request: TaskRequest
    if step.method is MethodKind.WAIT_FOR:
        request = pb.InvokeWaitForMethodRequest(
            context=_step_context(run, step),
            flow_type=run.flow_type,
            step_type=step.step_type,
            step_input=step.input,
        )
        _load_state(
            request,
            run,
            options.wait_for_load_attribute_map_instances,
            options.wait_for_load_channel_names,
            options.wait_for_load_channel_map_instances,
        )
    else:
        request = pb.InvokeExecuteMethodRequest(
            context=_step_context(run, step),
            flow_type=run.flow_type,
            step_type=step.step_type,
            step_exe_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
        )
        _load_state(
            request,
            run,
            options.execute_load_attribute_map_instances,
            options.execute_load_channel_names,
            options.execute_load_channel_map_instances,
        )
        if step.has_input:
            request.step_input.CopyFrom(step.input)
        results = condition_results(step, sub_flow_results, run.flow_id)
        if results is not None:
            request.condition_results.CopyFrom(results)
    return MethodTask(request, blobs.externalize(request))


def rpc_request(
    run: FlowRun, request: pb.InvokeRPCRequest, blobs: BlobStore
) -> pb.InvokeWorkerRPCRequest:
    """The Worker request for a Client's ``InvokeRPC`` on ``run``."""
    worker_request = pb.InvokeWorkerRPCRequest(
        context=pb.Context(
            flow_id=run.flow_id,
            run_id=run.run_id,
            flow_started_timestamp=int(run.started_at),
            first_attempt_timestamp=int(time.time()),
            attempt=1,
            run_attempt=run.run_attempt,
        ),
        flow_type=run.flow_type,
        rpc_name=request.rpc_name,
        input=ensure_value(request.input),
    )
    _load_state(
        worker_request,
        run,
        request.load_attribute_map_instances,
        request.load_channel_names,
        request.load_channel_map_instances,
    )
    blobs.externalize(worker_request)
    return worker_request
