"""Waiting conditions of a Step: Timers and Channel / ChannelMap conditions.

A Step's ``wait_for`` returns a ``WaitingCondition``; each condition completes on its own (a
Channel condition consumes its messages when it completes) and the Step proceeds to ``execute``
when the condition type's rule holds (all, any, or any listed combination).
"""

from __future__ import annotations

from collections.abc import Callable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.flow_state import ConditionState, FlowRun, StepExecution

__all__ = ["SubFlowResults", "condition_results", "evaluate_step", "start_waiting", "sub_flow_id"]

SubFlowResults = Callable[[str], pb.FlowResult | None]
"""Looks up a SubFlow by ID: its result once closed, else None."""


def sub_flow_id(flow_id: str, step_execution_id: str, index: int) -> str:
    """The Flow ID of a Step's SubFlow, as the SDK derives it."""
    return f"SubFlow:{flow_id}-{step_execution_id}-{index}"


def start_waiting(step: StepExecution, waiting: pb.WaitingCondition, now: float) -> None:
    """Attach ``waiting`` to ``step`` and compute its Timers' firing times."""
    step.waiting = waiting
    step.timers = [
        ConditionState(
            fire_at=float(timer.firing_unix_timestamp_seconds)
            if timer.firing_unix_timestamp_seconds
            else now + timer.duration_seconds
        )
        for timer in waiting.timer_conditions
    ]
    step.channels = [ConditionState() for _ in waiting.channel_conditions]
    step.sub_flows = [ConditionState() for _ in waiting.sub_flow_conditions]


def _take_from_channel(run: FlowRun, condition: pb.ChannelCondition, state: ConditionState) -> bool:
    queue = run.channels.get(condition.channel_name, [])
    at_least = condition.at_least if condition.HasField("at_least") else None
    at_most = condition.at_most if condition.HasField("at_most") else None
    if at_least is not None and len(queue) < at_least:
        return False
    count = len(queue) if at_most is None else min(len(queue), at_most)
    state.values = [message.value for message in queue[:count]]
    del queue[:count]
    if not queue:
        run.channels.pop(condition.channel_name, None)
    state.completed = True
    return True


def _is_satisfied(step: StepExecution) -> bool:
    waiting = step.waiting
    assert waiting is not None
    states = [*step.timers, *step.channels, *step.sub_flows]
    kind = waiting.waiting_condition_type
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMPLETED:
        return any(state.completed for state in states)
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED:
        by_id: dict[str, ConditionState] = {}
        for condition, state in zip(waiting.timer_conditions, step.timers, strict=True):
            by_id[condition.condition_id] = state
        for channel, state in zip(waiting.channel_conditions, step.channels, strict=True):
            by_id[channel.condition_id] = state
        for sub_flow, state in zip(waiting.sub_flow_conditions, step.sub_flows, strict=True):
            by_id[sub_flow.condition_id] = state
        return any(
            all(by_id[cid].completed for cid in combination.condition_ids if cid in by_id)
            for combination in waiting.condition_combinations
        )
    return all(state.completed for state in states)


def evaluate_step(
    run: FlowRun, step: StepExecution, now: float, sub_flow_results: SubFlowResults
) -> bool:
    """Complete whatever conditions can complete now; True when the Step may execute.

    With ``any`` semantics, evaluation stops at the first completed condition so no Channel
    message is consumed for a condition the Step will not need.
    """
    waiting = step.waiting
    if waiting is None:
        return True
    stop_at_first = waiting.waiting_condition_type == pb.WAITING_CONDITION_TYPE_ANY_COMPLETED
    if stop_at_first and _is_satisfied(step):
        return True
    for state in step.timers:
        if not state.completed and (state.skipped or now >= state.fire_at):
            state.completed = True
            if stop_at_first:
                return True
    for condition, state in zip(waiting.channel_conditions, step.channels, strict=True):
        if not state.completed and _take_from_channel(run, condition, state) and stop_at_first:
            return True
    for index, state in enumerate(step.sub_flows):
        if state.completed:
            continue
        result = sub_flow_results(sub_flow_id(run.flow_id, step.step_execution_id, index))
        if result is not None:
            state.completed = True
            state.result = result
            if stop_at_first:
                return True
    return _is_satisfied(step)


def condition_results(
    step: StepExecution, sub_flow_results: SubFlowResults, flow_id: str
) -> pb.ConditionResults | None:
    """What ``execute`` learns about the conditions (None when the Step did not wait)."""
    if step.waiting is None and not step.wait_for_failed:
        return None
    results = pb.ConditionResults(wait_for_failed=step.wait_for_failed)
    if step.waiting is None:
        return results
    for timer, state in zip(step.waiting.timer_conditions, step.timers, strict=True):
        results.timer_results.add(condition_id=timer.condition_id, condition_status=_status(state))
    for channel, state in zip(step.waiting.channel_conditions, step.channels, strict=True):
        results.channel_results.add(
            condition_id=channel.condition_id,
            condition_status=_status(state),
            channel_name=channel.channel_name,
            values=state.values,
        )
    for index, state in enumerate(step.sub_flows):
        if state.result is not None:
            results.sub_flow_results.append(state.result)
            continue
        # Another condition won first: report the SubFlow's current (running) snapshot.
        current = sub_flow_results(sub_flow_id(flow_id, step.step_execution_id, index))
        results.sub_flow_results.append(
            current or pb.FlowResult(flow_status=pb.FLOW_STATUS_RUNNING)
        )
    return results


def _status(state: ConditionState) -> pb.ConditionStatus:
    return pb.CONDITION_STATUS_COMPLETED if state.completed else pb.CONDITION_STATUS_WAITING
