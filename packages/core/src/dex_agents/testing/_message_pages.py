"""Reading all of a session's stored messages, page by page, as a client of the session would."""

from __future__ import annotations

from dex_agents import AgentMessage, AgentMessagesPage, AgentSessionClient


async def read_agent_message_pages(
    sessions: AgentSessionClient, session_id: str, *, limit: int = 200
) -> list[AgentMessagesPage]:
    """Every page of ``list_agent_messages`` from the oldest stored message, ``limit`` a page.

    A test asserts what each page holds (its size, ``deleted_before_sequence``) or joins them.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, turn_ended, wait_for_agent_snapshot
        >>> async def page_sizes() -> list[int]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("pages-example", "Hi")
        ...         await wait_for_agent_snapshot(sessions, "pages-example", turn_ended(1))
        ...         pages = await read_agent_message_pages(sessions, "pages-example", limit=1)
        ...         return [len(page.messages) for page in pages]
        >>> asyncio.run(page_sizes())
        [1, 1]
    """
    pages: list[AgentMessagesPage] = []
    after: int | None = None
    while True:
        page = await sessions.list_agent_messages(session_id, after_sequence=after, limit=limit)
        pages.append(page)
        if page.next_after_sequence is None:
            return pages
        after = page.next_after_sequence


async def read_agent_messages(
    sessions: AgentSessionClient, session_id: str, *, limit: int = 200
) -> list[AgentMessage]:
    """Every stored message of the session, oldest first, read ``limit`` a page.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, turn_ended, wait_for_agent_snapshot
        >>> async def texts() -> list[str | None]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("messages-example", "Hi")
        ...         await wait_for_agent_snapshot(sessions, "messages-example", turn_ended(1))
        ...         return [m.text for m in await read_agent_messages(sessions, "messages-example")]
        >>> asyncio.run(texts())
        ['Hi', 'Hello']
    """
    pages = await read_agent_message_pages(sessions, session_id, limit=limit)
    return [message for page in pages for message in page.messages]
