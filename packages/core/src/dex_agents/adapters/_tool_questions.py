"""What a tool that asked the user sees when its call runs again: the answers' texts.

The session, not the runner, settles a question that got no answer: a declined question, one
past its deadline and one withdrawn by steering record the call ``rejected`` with the session's
text (``The user declined to answer.``, ``question deadline passed``), and the tool never runs
again. So a rerun of a call carries only answered questions, and every runner hands the tool the
same texts, in the framework's own resume value (a LangGraph ``Command(resume=...)``, a Strands
interrupt's response, a Pydantic AI deferred result, an ADK confirmation).
"""

from __future__ import annotations

from dex_agents._runner_contract import DeferredToolExecution
from dex_agents._values import QuestionResolution
from dex_agents.exceptions import RunnerContractError

__all__ = ["tool_question_answers"]


def tool_question_answers(call: DeferredToolExecution) -> tuple[str, ...]:
    """The user's answers to the questions the call's tool asked, oldest first.

    Raises:
        RunnerContractError: When a question of the call was not answered (declined, or past its
            deadline): the session records such a call ``rejected`` and never runs it again, so
            only a hand-built ``DeferredToolExecution`` carries one.

    Example:
        >>> from dex_agents import AgentEventWriter, QuestionAnswer
        >>> answered = QuestionAnswer("call-1-input-1", "Ship it?", QuestionResolution.ANSWERED, "yes")
        >>> call = DeferredToolExecution(
        ...     "session-42", record, 1, AgentEventWriter.discarding(), input_answers=(answered,)
        ... )
        >>> tool_question_answers(call)
        ('yes',)
    """
    texts: list[str] = []
    for answer in call.input_answers:
        if answer.resolution is not QuestionResolution.ANSWERED or answer.answer is None:
            raise RunnerContractError(
                f"tool call {call.tool_call.tool_call_id} runs again after its question "
                f"{answer.interrupt_id} was {answer.resolution.value}, not answered; the session "
                "records such a call rejected"
            )
        texts.append(answer.answer)
    return tuple(texts)
