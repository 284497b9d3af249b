"""What the dex-agents 0.3.0 documentation lists, as data several tests check against: each
enum's values in their documented order, and each event type's payload keys."""

from __future__ import annotations

#: Each enum's documented values, in the documentation's order.
SEED_ENUM_VALUES: dict[str, tuple[str, ...]] = {
    "AgentStatus": (
        "waiting_for_user_message",
        "running_model",
        "running_tools",
        "compacting_context",
    ),
    "InteractionMode": ("chat", "planning", "executing"),
    "AgentToolCallStatus": (
        "awaiting_approval",
        "approved",
        "awaiting_answer",
        "waiting_for_timer",
        "waiting_for_task",
        "rejected",
        "succeeded",
        "failed",
        "outcome_unknown",
    ),
    "ToolEffect": ("read", "idempotent_write", "non_idempotent_write", "unclassified"),
    "CancellationReason": ("steered", "turn_cancelled"),
    "QuestionResolution": ("answered", "declined", "deadline_passed"),
    "BuiltInTool": ("ask_user", "durable_wait", "write_todos"),
    "PlanStatus": ("draft", "active", "completed", "cleared"),
    "MessageRole": ("user",),
    "AgentEventType": (
        "turn_started",
        "turn_completed",
        "turn_failed",
        "turn_steered",
        "turn_cancelled",
        "text_delta",
        "reasoning_delta",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_deferred",
        "interrupt_raised",
        "interrupt_resolved",
        "timer_started",
        "plan_updated",
        "plan_execution_started",
        "tool_task_started",
        "usage_recorded",
        "compaction_started",
        "compaction_finished",
    ),
}


#: Payload keys of each event type, as the documentation's AgentEvents list gives them.
SEED_EVENT_PAYLOAD_KEYS: dict[str, frozenset[str]] = {
    "turn_started": frozenset({"sequence"}),
    "turn_completed": frozenset({"message_count"}),
    "turn_failed": frozenset({"error"}),
    "turn_steered": frozenset({"steered_message_count", "message_count"}),
    "turn_cancelled": frozenset({"message_count"}),
    "text_delta": frozenset({"text"}),
    "reasoning_delta": frozenset({"text"}),
    "tool_call_started": frozenset({"tool_call_id", "tool_name"}),
    "tool_call_finished": frozenset({"tool_call_id", "tool_name", "status"}),
    "tool_call_deferred": frozenset({"tool_call_id", "tool_name", "effect", "requires_approval"}),
    "interrupt_raised": frozenset(
        {
            "interrupt_id",
            "tool_call_id",
            "tool_name",
            "deadline",
            "kind",
            "question",
            "choices",
            "allows_free_text",
        }
    ),
    "interrupt_resolved": frozenset(
        {"interrupt_id", "approved", "rejection_message", "kind", "answered", "cancellation_reason"}
    ),
    "timer_started": frozenset({"tool_call_id", "wait_until", "reason"}),
    "plan_updated": frozenset({"revision", "status", "task_count"}),
    "plan_execution_started": frozenset({"revision"}),
    "tool_task_started": frozenset({"tool_call_id", "tool_name", "task_id"}),
    "usage_recorded": frozenset({"recorded", "session"}),
    "compaction_started": frozenset({"through_sequence"}),
    "compaction_finished": frozenset({"generation", "through_sequence"}),
}
