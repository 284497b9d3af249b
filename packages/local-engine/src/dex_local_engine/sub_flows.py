"""SubFlows: the child Flows a waiting Step asks for, and their results.

A child's Flow ID is derived from its parent's Step execution (as the SDK derives it); its reuse
policy decides whether an existing child is attached to or started again. A closing child wakes
its parent (:class:`~dex_local_engine.run_lifecycle.RunLifecycle` does that after the commit).
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.closed_results import flow_result
from dex_local_engine.conditions import sub_flow_id
from dex_local_engine.flow_runs import FlowRuns
from dex_local_engine.flow_state import FlowRun, StepExecution
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.run_lifecycle import RunLifecycle
from dex_local_engine.step_scheduler import NO_ERROR
from dex_local_engine.wire_values import ensure_value

__all__ = ["SubFlows"]


class SubFlows:
    """Creates SubFlows and reports their results (a :class:`~dex_local_engine.step_scheduler.
    SubFlowPort`).

    Example::

        children = sub_flows.start(run, step, response.waiting_condition)
        journal.commit(run)
        for child in children:
            sub_flows.begin(child)
    """

    def __init__(self, runs: FlowRuns, lifecycle: RunLifecycle, journal: RunJournal) -> None:
        self._runs = runs
        self._lifecycle = lifecycle
        self._journal = journal

    def result(self, flow_id: str) -> pb.FlowResult | None:
        """The SubFlow's result once it closed, else None."""
        child = self._runs.find(flow_id)
        if child is None or child.is_running:
            return None
        return flow_result(child)

    def start(
        self, run: FlowRun, step: StepExecution, waiting: pb.WaitingCondition
    ) -> list[FlowRun]:
        """Create (not yet launch) the SubFlows a waiting Step asked for."""
        started = []
        for index, condition in enumerate(waiting.sub_flow_conditions):
            child_id = sub_flow_id(run.flow_id, step.step_execution_id, index)
            existing = self._runs.find(child_id)
            if existing is not None and not self._replaces(
                existing, condition.options.reuse_policy
            ):
                continue
            options = condition.options
            config = pb.FlowConfig()
            config.CopyFrom(options.flow_config_override)
            if not config.HasField("worker_target"):
                config.worker_target.CopyFrom(run.config.worker_target)
            request = pb.StartFlowRequest(
                flow_id=child_id,
                flow_type=condition.sub_flow_type,
                flow_timeout_seconds=options.flow_timeout_seconds,
                flow_timeout_policy=options.flow_timeout_policy,
                start_step_type=condition.start_step_type,
                step_input=ensure_value(condition.step_input),
                step_options=condition.step_options,
                flow_start_options=pb.FlowStartOptions(
                    flow_start_delay_seconds=options.flow_start_delay_seconds,
                    attributes=options.attributes,
                    flow_config_override=config,
                    timeout_handler_options=options.timeout_handler_options,
                ),
            )
            if options.HasField("retry_policy"):
                request.flow_start_options.retry_policy.CopyFrom(options.retry_policy)
            child, _ = self._lifecycle.create_run(request, parent_flow_id=run.flow_id)
            started.append(child)
        return started

    def _replaces(self, existing: FlowRun, policy: pb.SubFlowReusePolicy) -> bool:
        """Whether a new run replaces the SubFlow's ``existing`` run, as Dex resolves it.

        ``ATTACH`` never replaces; ``ALWAYS_RESTART`` always does, terminating a running one;
        ``RESTART_IF_PREVIOUS_EXITS_ABNORMALLY`` (also the default) replaces a run that closed
        other than completed. A Step execution meets its SubFlows' existing runs only when its
        ``wait_for`` runs again for the same Flow ID: a Flow ID reused, or time travel.
        """
        if policy == pb.SUB_FLOW_REUSE_POLICY_ATTACH:
            return False
        if policy == pb.SUB_FLOW_REUSE_POLICY_ALWAYS_RESTART:
            if existing.is_running:
                self._lifecycle.close(
                    existing, pb.FLOW_STATUS_TERMINATED, NO_ERROR, "replaced by a new SubFlow run"
                )
                self._journal.commit(existing)
            return True
        return not existing.is_running and existing.status != pb.FLOW_STATUS_COMPLETED

    def begin(self, child: FlowRun) -> None:
        """Persist and launch a SubFlow made by :meth:`start`."""
        self._lifecycle.begin_run(child)
