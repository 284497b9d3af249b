"""The Step type names of the agent session Flow.

Every name here is a protocol Step type that Dex history, Dex Web, and Flow search show, so the
names never change between releases. The session registers the Steps of later features under the
names listed here as well, which keeps one vocabulary for history readers and search queries.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AgentSessionStepType"]


class AgentSessionStepType(StrEnum):
    """Step types of ``AgentSessionFlow``, as Dex history and search show them.

    Example:
        >>> AgentSessionStepType.AWAIT_TOOL_APPROVAL.value
        'AwaitToolApproval'
    """

    START_AGENT_SESSION = "StartAgentSession"
    AWAIT_USER_MESSAGE = "AwaitUserMessage"
    RUN_MODEL = "RunModel"
    COMPACT_CONTEXT = "CompactContext"
    AWAIT_TOOL_APPROVAL = "AwaitToolApproval"
    AWAIT_QUESTION_ANSWER = "AwaitQuestionAnswer"
    AWAIT_TIMER = "AwaitTimer"
    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"
    CHECK_TOOL_OUTCOME = "CheckToolOutcome"
    POLL_TOOL_TASK = "PollToolTask"
    RECORD_TOOL_FAILURE = "RecordToolFailure"
    RECORD_TOOL_OUTCOME_UNKNOWN = "RecordToolOutcomeUnknown"
    RESUME_TURN = "ResumeTurn"
    APPLY_TURN_CONTROL = "ApplyTurnControl"
    RECORD_TURN_FAILURE = "RecordTurnFailure"
    FINISH_TURN_CANCELLATION = "FinishTurnCancellation"
    CANCEL_TOOL_TASK = "CancelToolTask"
