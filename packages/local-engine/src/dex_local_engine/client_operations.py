"""Client requests that change a running Flow directly: Channel publishes and deletes,
Attribute writes, Timer skips, FlowConfig updates, and ``InvokeRPC``.

An RPC runs on a Worker and its writes and decisions apply in one commit. A non-transactional
RPC without locks may run on a closed run if it returns no effects; on a running Flow it records
no history event then (Dex serves it as a query). A transactional RPC (``is_transactional`` or
locks) deleting a Channel message that is not pending fails with ChannelMessageNotFound and
applies nothing.
"""

from __future__ import annotations

import time
import uuid

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.attribute_locks import AttributeLocks
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.flow_runs import FlowRuns
from dex_local_engine.flow_state import RPC_FROM_PREFIX, FlowRun, StepPhase
from dex_local_engine.flow_writes import (
    apply_attribute_writes,
    apply_method_writes,
    delete_messages,
    publish,
    require_pending,
)
from dex_local_engine.result_checks import (
    MALFORMED_RESULT_ERROR_TYPE,
    has_effects,
    malformed_rpc_result,
    refuse_oversized,
)
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.step_scheduler import StepScheduler
from dex_local_engine.task_requests import rpc_request
from dex_local_engine.task_runner import (
    UNKNOWN_NAME_ERROR_TYPE,
    AttemptFailure,
    TaskRunner,
)
from dex_local_engine.value_limits import oversized_values
from dex_local_engine.wire_values import ensure_value

__all__ = ["ClientOperations"]

_DEFAULT_RPC_TIMEOUT = 60.0
_CONFIG_FIELDS = (
    "active_step_search_mode",
    "continue_as_new_threshold",
    "continue_as_new_page_size_in_bytes",
    "step_durability",
    "worker_target",
    "attribute_store_names",
)


class ClientOperations:
    """The FlowService operations a Client uses to change a Flow.

    Example::

        operations = ClientOperations(journal, runs, steps, locks, tasks, blobs)
        operations.publish(request)
        response = await operations.invoke_rpc(rpc_request)

    Raises (from operations): :class:`~dex_local_engine.errors.EngineError`.
    """

    def __init__(
        self,
        journal: RunJournal,
        runs: FlowRuns,
        steps: StepScheduler,
        locks: AttributeLocks,
        tasks: TaskRunner,
        blobs: BlobStore,
    ) -> None:
        self._journal = journal
        self._runs = runs
        self._steps = steps
        self._locks = locks
        self._tasks = tasks
        self._blobs = blobs

    def publish(self, request: pb.PublishToChannelRequest) -> None:
        """Publish external Channel messages."""
        run = self._runs.get_running(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(messages=request.messages))
        self._blobs.intern(request)
        published = publish(run, request.messages)
        self._journal.event(
            run, channel_external_publish=pb.ChannelExternalPublishEvent(messages=published)
        )
        self._steps.evaluate_waiting(run, commit=False)
        self._journal.commit(run)

    def delete_message(self, request: pb.DeleteChannelMessageRequest) -> None:
        """Delete one pending Channel message."""
        run = self._runs.get_running(request.flow_id, request.run_id)
        deletion = pb.ChannelMessageDeletion(
            channel_name=request.channel_name, message_id=request.message_id
        )
        delete_messages(run, [deletion], strict=True)
        self._journal.event(
            run, channel_external_delete=pb.ChannelExternalDeleteEvent(messages=[deletion])
        )
        self._journal.commit(run)

    def set_attributes(self, request: pb.SetAttributesRequest) -> None:
        """Write Attributes from a client."""
        run = self._runs.get_running(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(attributes=request.attributes))
        self._blobs.intern(request)
        apply_attribute_writes(run, request.attributes)
        self._journal.event(
            run,
            rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                upsert_attributes=request.attributes, is_set_attribute_api=True
            ),
        )
        self._journal.commit(run)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """Fire a waiting Step's Timer now."""
        run = self._runs.get_running(request.flow_id, request.run_id)
        step = run.steps.get(request.step_execution_id)
        if step is None or step.waiting is None or step.phase is not StepPhase.WAITING:
            raise errors.failed_precondition(
                f"Step execution {request.step_execution_id!r} is not waiting on Timers"
            )
        timers = step.waiting.timer_conditions
        if request.timer_condition_id:
            indexes = [
                i for i, t in enumerate(timers) if t.condition_id == request.timer_condition_id
            ]
        else:
            indexes = [request.timer_condition_index]
        if not indexes or not 0 <= indexes[0] < len(timers):
            raise errors.invalid_argument(
                f"Step execution {request.step_execution_id!r} has no such Timer"
            )
        step.timers[indexes[0]].skipped = True
        self._steps.evaluate_waiting(run, commit=False)
        self._journal.commit(run)

    def update_config(self, request: pb.UpdateFlowConfigRequest) -> None:
        """Merge the set fields of a FlowConfig into a running Flow."""
        run = self._runs.get_running(request.flow_id, request.run_id)
        new = request.flow_config
        for name in _CONFIG_FIELDS:
            if new.HasField(name):
                field = getattr(new, name)
                if isinstance(field, int):
                    setattr(run.config, name, field)
                else:
                    getattr(run.config, name).CopyFrom(field)
        self._journal.commit(run)

    # ------------------------------------------------------------------ RPCs

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        """Run an RPC on a Worker and apply its writes and decisions atomically."""
        if not request.rpc_name:
            raise errors.invalid_argument("InvokeRPC: rpc_name is required")
        keys = list(request.lock_attribute_keys)
        run = self._runs.get_run(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(others=[("the RPC input", request.input)]))
        # A non-transactional RPC without locks may read a closed run if it changes nothing.
        if not run.is_running and (request.is_transactional or keys):
            raise errors.flow_not_active(request.flow_id)
        outcome = await self._run_rpc(run, request, keys)
        if isinstance(outcome, AttemptFailure):
            if outcome.error.error_type == f"dex_local_engine.{UNKNOWN_NAME_ERROR_TYPE}":
                raise errors.unknown_rpc(request.rpc_name, run.flow_type)
            if outcome.error.error_type == MALFORMED_RESULT_ERROR_TYPE:
                raise errors.failed_precondition(
                    f"RPC {request.rpc_name!r} result refused: {outcome.error.detail}"
                )
            if outcome.error.error_type.startswith("dex_local_engine."):
                raise errors.worker_unavailable(outcome.error.detail)
            raise errors.worker_api_error(outcome.error)
        problem = oversized_values(
            attributes=outcome.upsert_attributes,
            messages=outcome.publish_to_channel,
            decision=outcome.step_decision,
            others=[("the RPC output", outcome.output)],
        )
        problem = problem or malformed_rpc_result(outcome, self._blobs.holds)
        if problem is not None:
            raise errors.failed_precondition(f"RPC {request.rpc_name!r} result refused: {problem}")
        if not run.is_running:
            if has_effects(outcome):
                raise errors.flow_not_active(run.flow_id)
            return pb.InvokeRPCResponse(output=ensure_value(outcome.output))
        return self._apply_rpc(
            run, request, outcome, transactional=bool(request.is_transactional or keys)
        )

    async def _run_rpc(
        self, run: FlowRun, request: pb.InvokeRPCRequest, keys: list[str]
    ) -> pb.InvokeWorkerRPCResponse | AttemptFailure:
        """Hold the RPC's locks and run it on a Worker until it ran or its timeout passed."""
        holder = f"rpc:{uuid.uuid4()}"
        held = self._locks.try_acquire(run.run_id, keys, holder)
        if held:
            raise errors.rpc_lock_conflict(held)
        try:
            worker_request = rpc_request(run, request, self._blobs)
            timeout = float(request.timeout_seconds or _DEFAULT_RPC_TIMEOUT)
            deadline = time.time() + timeout
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise errors.EngineError(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
                        f"RPC {request.rpc_name!r} timed out after {timeout:g}s waiting for a Worker",
                    )
                outcome = await self._tasks.run(run, worker_request, remaining, None, None)
                if outcome is not None:
                    break
        finally:
            self._locks.release(run.run_id, keys, holder)
        assert isinstance(outcome, pb.InvokeWorkerRPCResponse | AttemptFailure)
        return outcome

    def _apply_rpc(
        self,
        run: FlowRun,
        request: pb.InvokeRPCRequest,
        outcome: pb.InvokeWorkerRPCResponse,
        *,
        transactional: bool,
    ) -> pb.InvokeRPCResponse:
        output = ensure_value(outcome.output)
        changed = has_effects(outcome)
        if not changed and not transactional:
            # Dex serves such an RPC as a query: nothing is recorded, so reads do not grow history.
            return pb.InvokeRPCResponse(output=output)
        if transactional:
            # Checked before any write: a missing message fails the whole RPC, applying nothing.
            require_pending(run, outcome.delete_from_channel)
        self._blobs.intern(outcome)
        apply_method_writes(
            run, outcome.upsert_attributes, outcome.publish_to_channel, outcome.delete_from_channel
        )
        decision = outcome.step_decision
        self._steps.cancel_steps(run, decision.cancel_step_types, None)
        from_id = f"{RPC_FROM_PREFIX}{request.rpc_name}"
        started = [self._steps.new_step(run, m, from_id, time.time()) for m in decision.next_steps]
        self._journal.event(
            run,
            rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                rpc_name=request.rpc_name,
                input=ensure_value(request.input),
                # The output of a transactional RPC that changed nothing is the caller's alone.
                output=output if changed else None,
                step_decision=decision,
                upsert_attributes=outcome.upsert_attributes,
                record_events=outcome.record_events,
                publish_to_channel=outcome.publish_to_channel,
                delete_from_channel=outcome.delete_from_channel,
            ),
        )
        self._steps.after_steps_changed(run, started)
        return pb.InvokeRPCResponse(output=output)
