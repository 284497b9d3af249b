"""Errors of this adapter; each subclasses ``dex_agents.DexAgentsError``."""

from __future__ import annotations

from dex_agents import DexAgentsError

__all__ = ["GuardrailTripwireError"]


class GuardrailTripwireError(DexAgentsError):
    """An input or output guardrail of the agent triggered its tripwire in ``RunModel``.

    The SDK ends its run with a tripwire exception; the session treats it as a failed model call,
    so ``RunModel`` retries it (the guardrail runs again) and then fails the turn with this message
    as ``last_turn_error``.
    """
