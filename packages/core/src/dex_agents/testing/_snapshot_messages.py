"""What a test reads most often from a session's snapshot: the answers, and the tool results."""

from __future__ import annotations

from dex_agents import AgentMessage, AgentSnapshot, MessageRole

__all__ = ["assistant_texts", "tool_messages"]


def assistant_texts(snapshot: AgentSnapshot) -> list[str]:
    """The text of every stored assistant message that has text (a tool call alone has none),
    oldest first.

    Example:
        >>> from types import SimpleNamespace
        >>> messages = (
        ...     SimpleNamespace(role=MessageRole.ASSISTANT, text=None),
        ...     SimpleNamespace(role=MessageRole.ASSISTANT, text="Order 7 has shipped."),
        ... )
        >>> assistant_texts(SimpleNamespace(messages=messages))
        ['Order 7 has shipped.']
    """
    return [
        message.text
        for message in snapshot.messages
        if message.role is MessageRole.ASSISTANT and message.text
    ]


def tool_messages(snapshot: AgentSnapshot) -> list[AgentMessage]:
    """Every stored tool result message, oldest first.

    Example:
        >>> from types import SimpleNamespace
        >>> result = SimpleNamespace(role=MessageRole.TOOL, tool_output="shipped")
        >>> user = SimpleNamespace(role=MessageRole.USER, tool_output=None)
        >>> [m.tool_output for m in tool_messages(SimpleNamespace(messages=(user, result)))]
        ['shipped']
    """
    return [message for message in snapshot.messages if message.role is MessageRole.TOOL]
