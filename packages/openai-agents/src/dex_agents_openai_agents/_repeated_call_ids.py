"""Call IDs a model gave again in a later response, told apart in a model call's input.

Some OpenAI-compatible servers (and LiteLLM for some providers) number tool calls per response
(``call_0``), so a later turn's call can carry an ID an earlier turn's call already has. The SDK
keeps one item per call ID in a model call's input (``deduplicate_input_items_preferring_latest``):
the earlier call's result would vanish and the new call would move back to the earlier call's
place, away from its own turn. The input therefore gives every earlier use of a repeated ID, call
and result alike, an ID of its own; the latest use keeps the model's ID, which the turn's records,
idempotency keys and the SDK's interruptions of this call all carry. Stored items keep the model's
IDs, so the rename is the same on every model call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from dex_agents import JsonObject

__all__ = ["distinct_call_ids"]

_OUTPUT_SUFFIX = "_output"


def distinct_call_ids(items: Sequence[JsonObject]) -> list[JsonObject]:
    """``items`` with each earlier use of a repeated call ID renamed ``<id>_r<n>`` (the n-th use).

    A result takes the name of the call before it with its ID; the new names use only the call
    ID's own characters, ``_`` and digits (what providers accept), and no item already has them.

    Example:
        >>> call = {"type": "function_call", "call_id": "call_0", "name": "t", "arguments": "{}"}
        >>> result = {"type": "function_call_output", "call_id": "call_0", "output": "ok"}
        >>> [item["call_id"] for item in distinct_call_ids([call, result, call, result])]
        ['call_0_r1', 'call_0_r1', 'call_0', 'call_0']
    """
    uses = Counter(call_id for item in items if (call_id := _call_id(item)) and _is_call(item))
    repeated = {call_id for call_id, count in uses.items() if count > 1}
    if not repeated:
        return list(items)
    taken = {call_id for item in items if (call_id := _call_id(item))}
    seen: Counter[str] = Counter()
    current: dict[str, str] = {}
    renamed: list[JsonObject] = []
    for item in items:
        call_id = _call_id(item)
        if call_id not in repeated:
            renamed.append(item)
            continue
        if _is_call(item):
            seen[call_id] += 1
            use = seen[call_id]
            current[call_id] = call_id if use == uses[call_id] else _fresh(call_id, use, taken)
        name = current.get(call_id, call_id)
        renamed.append(item if name == call_id else {**item, "call_id": name})
    return renamed


def _call_id(item: JsonObject) -> str | None:
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and "role" not in item else None


def _is_call(item: JsonObject) -> bool:
    return not str(item.get("type", "")).endswith(_OUTPUT_SUFFIX)


def _fresh(call_id: str, use: int, taken: set[str]) -> str:
    name = f"{call_id}_r{use}"
    while name in taken:
        name += "_"
    taken.add(name)
    return name
