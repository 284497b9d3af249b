"""Fenced start claims of single-attempt tool calls: was a lost attempt's tool ever started?

A ``non_idempotent_write`` or ``unclassified`` call runs once. When its one attempt is lost, the
failure route must tell *the tool may have started* (``outcome_unknown`` or the outcome check)
from *the tool certainly did not start* (run the call again). A Step's own writes commit only with
its result, so the Step makes that fact durable through the session Flow's ``claim_tool_attempt``
RPC, whose handler reads and writes the call's ``AgentToolAttemptClaims`` instance while Dex
holds that instance's lock, and whose writes Dex commits before the caller gets the answer:

- ``CallSingleAttemptTool`` **claims** its Step execution right before the tool starts; the tool
  starts only on a granted claim.
- ``RecordToolOutcomeUnknown`` **fences** the lost execution before it decides.

A claim call that got no answer is **released** by its Worker (Dex may have taken it), before
the Step fails. All go through the same lock, so one of claim and fence is first: a claim first means the tool may have
started (today's ``outcome_unknown``/check path); a fence first means it never started, and the
late claim is refused, so the call can run again under the same idempotency key.

The RPC needs a Dex client in the Worker: :meth:`AgentSessionFlow.use_worker_client`. A Worker
without one runs single-attempt tools unclaimed and its failure route does not fence.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from dex import AsyncClient, Context, RPCInvokeOptions, RpcLockConflictError, RPCResult

from dex_agents._session.persistence import AGENT_TOOL_ATTEMPT_CLAIMS, AGENT_TOOL_CALLS
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.exceptions import DexAgentsError

__all__ = [
    "MAX_UNSTARTED_RERUNS",
    "AttemptClaimAction",
    "AttemptClaimAnswer",
    "AttemptClaimRequest",
    "AttemptClaims",
    "ToolAttemptNotClaimedError",
    "answer_attempt_claim",
]

MAX_UNSTARTED_RERUNS: Final = 3
"""A call whose attempts were lost before its tool started runs again at most this many times;
then it records ``failed`` with ``TOOL_CALL_NOT_RUN_ERROR_PREFIX`` (it never ran)."""


_ClaimRpc = Callable[[Context, str], RPCResult[str]]

_RELEASE_SECONDS: Final = 60.0
"""How long a Worker keeps trying to withdraw a claim whose call failed."""
_RELEASES: set[asyncio.Future[None]] = set()
_log = logging.getLogger(__name__)

_LOCK_CONFLICT_DELAYS: Final = (0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Waits after each lock conflict of one claim or fence (Dex does not queue RPC locks)."""


class AttemptClaimAction(StrEnum):
    """What a ``claim_tool_attempt`` request asks."""

    CLAIM = "claim"
    FENCE = "fence"
    RELEASE = "release"


class AttemptClaimAnswer(StrEnum):
    """The answer of ``claim_tool_attempt``.

    ``granted``/``refused`` answer a claim (and ``released``/``refused`` a release); ``started``,
    ``not_started`` and ``other`` a fence:
    the fenced execution claimed (its tool may have started), it did not (never started), or it
    did not and another execution of the call holds the live claim (that one owns the record).
    """

    GRANTED = "granted"
    REFUSED = "refused"
    RELEASED = "released"
    STARTED = "started"
    NOT_STARTED = "not_started"
    OTHER = "other"


class ToolAttemptNotClaimedError(DexAgentsError):
    """A single-attempt tool did not start because its start claim was refused or not made."""


@dataclass(frozen=True)
class AttemptClaimRequest:
    """One claim or fence of one Step execution of one call, as the RPC's JSON text input.

    ``token`` is new for each try of a claim: the same try asking again (its answer was lost) is
    granted again; the same execution handed out again by Dex is another try and is refused.
    """

    action: AttemptClaimAction
    tool_call_id: str
    step_execution_id: str
    token: str

    def to_text(self) -> str:
        """The RPC input."""
        return json.dumps(
            {
                "action": self.action.value,
                "call": self.tool_call_id,
                "execution": self.step_execution_id,
                "token": self.token,
            }
        )

    @staticmethod
    def from_text(text: str) -> AttemptClaimRequest:
        """Parse the RPC input.

        Raises:
            ValueError: When ``text`` is not a claim request.
        """
        value = json.loads(text)
        return AttemptClaimRequest(
            AttemptClaimAction(value["action"]),
            str(value["call"]),
            str(value["execution"]),
            str(value["token"]),
        )


@dataclass(frozen=True)
class _ClaimState:
    """A call's ``AgentToolAttemptClaims`` value: the execution holding the claim and the
    Worker's token it claimed with, every fenced execution (fenced before it claimed, or after
    its claim was settled), and how many were fenced before they claimed."""

    claimed_by: str | None = None
    claim_token: str | None = None
    claim_generation: int = 0
    fenced: tuple[str, ...] = ()
    unstarted_fences: int = 0

    def to_text(self) -> str:
        return json.dumps(
            {
                "claimed_by": self.claimed_by,
                "token": self.claim_token,
                "generation": self.claim_generation,
                "fenced": list(self.fenced),
                "unstarted": self.unstarted_fences,
            }
        )

    @staticmethod
    def from_text(text: str | None) -> _ClaimState:
        if not text:
            return _ClaimState()
        value = json.loads(text)
        return _ClaimState(
            value["claimed_by"],
            value["token"],
            int(value["generation"]),
            tuple(value["fenced"]),
            int(value["unstarted"]),
        )


def answer_attempt_claim(context: Context, request: AttemptClaimRequest) -> str:
    """Decide one claim or fence, stage its write, and return the RPC output (JSON text: the
    answer and how many executions of the call were fenced before they started).

    The RPC holds the call's ``AgentToolAttemptClaims`` instance lock.

    A claim is granted to an execution that is not fenced, of a call whose record is still
    ``approved``, when no other live execution holds the claim (unfenced, at the record's current
    run: an execution that asked a question ended normally). A fence of the
    claimant answers ``started``; of an execution that never claimed, ``not_started`` (or
    ``other`` while another live execution holds the claim). Either way the execution is fenced,
    so a late claim of it is refused.
    """
    state = _ClaimState.from_text(AGENT_TOOL_ATTEMPT_CLAIMS.get(context, request.tool_call_id))
    answer, new_state = _decide(context, state, request)
    if new_state != state:
        AGENT_TOOL_ATTEMPT_CLAIMS.set(context, request.tool_call_id, new_state.to_text())
    return json.dumps({"answer": answer.value, "unstarted": new_state.unstarted_fences})


def _decide(
    context: Context, state: _ClaimState, request: AttemptClaimRequest
) -> tuple[AttemptClaimAnswer, _ClaimState]:
    record = AGENT_TOOL_CALLS.get(context, request.tool_call_id)
    generation = _generation(record) if record is not None else -1
    execution = request.step_execution_id
    # The holder's run is still the record's current one and was not fenced: it may be running.
    # (One of an earlier generation ended normally, asking a question: the call moved on.)
    holder_is_live = (
        state.claimed_by is not None
        and state.claimed_by not in state.fenced
        and state.claim_generation >= generation
    )
    if request.action is AttemptClaimAction.RELEASE:
        return _release(state, request)
    if request.action is AttemptClaimAction.CLAIM:
        if state.claimed_by == execution and state.claim_token == request.token:
            # The same try asking again (its first answer was lost): the same answer. The same
            # execution handed to another Worker has another token: refused, its tool may run.
            answer = (
                AttemptClaimAnswer.REFUSED
                if execution in state.fenced
                else AttemptClaimAnswer.GRANTED
            )
            return answer, state
        if (
            execution in state.fenced
            or holder_is_live
            or record is None
            or record.status is not AgentToolCallStatus.APPROVED
        ):
            return AttemptClaimAnswer.REFUSED, state
        return AttemptClaimAnswer.GRANTED, replace(
            state, claimed_by=execution, claim_token=request.token, claim_generation=generation
        )
    if state.claimed_by == execution:
        answer, fenced = AttemptClaimAnswer.STARTED, state
    else:
        answer = AttemptClaimAnswer.OTHER if holder_is_live else AttemptClaimAnswer.NOT_STARTED
        fenced = replace(state, unstarted_fences=state.unstarted_fences + 1)
    if execution in state.fenced:
        # A repeated fence (the failure route ran again): the first answer stands.
        return answer, state
    return answer, replace(fenced, fenced=(*state.fenced, execution))


def _release(
    state: _ClaimState, request: AttemptClaimRequest
) -> tuple[AttemptClaimAnswer, _ClaimState]:
    """An execution whose claim call failed says its tool did not start: its claim, if Dex took
    it, is withdrawn and the execution fenced (a claim still on its way is refused). Refused once
    the execution was fenced: the failure route's answer stands."""
    execution = request.step_execution_id
    if execution in state.fenced:
        return AttemptClaimAnswer.REFUSED, state
    released = replace(state, fenced=(*state.fenced, execution))
    if state.claimed_by == execution and state.claim_token == request.token:
        released = replace(released, claimed_by=None, claim_token=None)
    return AttemptClaimAnswer.RELEASED, released


def _generation(record: AgentToolCall) -> int:
    """Which run of the call's tool the record is at: one more after each answered question and
    each run again after an outcome check."""
    return len(record.input_answers) + record.run_again_count


class AttemptClaims:
    """The Worker's Dex client for the ``claim_tool_attempt`` RPC of one session Flow type.

    Set by :meth:`AgentSessionFlow.use_worker_client`; without a client a single-attempt tool
    starts unclaimed and its failure route does not fence (the lost attempt is judged as before).
    """

    def __init__(self) -> None:
        self._client: AsyncClient | None = None
        self._rpc: _ClaimRpc | None = None

    def bind(self, client: AsyncClient, rpc_method: _ClaimRpc) -> None:
        """Use ``client`` to invoke ``rpc_method`` (the Flow's bound ``claim_tool_attempt``)."""
        self._client = client
        self._rpc = rpc_method

    @property
    def is_bound(self) -> bool:
        """Whether a client was given."""
        return self._client is not None

    def release_after_failed_claim(
        self, flow_id: str, claim: AttemptClaimRequest
    ) -> asyncio.Future[None]:
        """Withdraw ``claim``, whose call failed (no answer: the engine died, the Step was
        cancelled), in a task of its own: its tool did not start. Tried until Dex answers or
        :data:`_RELEASE_SECONDS` passed; the failure route's fence decides if it comes first."""
        release = replace(claim, action=AttemptClaimAction.RELEASE)
        task = asyncio.ensure_future(self._release(flow_id, release))
        _RELEASES.add(task)
        task.add_done_callback(_RELEASES.discard)
        return task

    async def _release(self, flow_id: str, release: AttemptClaimRequest) -> None:
        deadline = time.monotonic() + _RELEASE_SECONDS
        delay = 0.1
        while True:
            try:
                await self.ask(flow_id, release)
                return
            except Exception:
                if time.monotonic() + delay > deadline:
                    _log.warning(
                        "could not release the start claim of tool call %r", release.tool_call_id
                    )
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def ask(
        self, flow_id: str, request: AttemptClaimRequest
    ) -> tuple[AttemptClaimAnswer, int]:
        """Invoke ``claim_tool_attempt``; return its answer, committed when this returns, and how
        many executions of the call were fenced before they started. A lock conflict (a claim
        and a fence at the same moment) is retried.

        Raises:
            ToolAttemptNotClaimedError: When no client was given.
            DexServiceError: When Dex cannot run the RPC (the engine is down, a lock conflict).
        """
        client, rpc_method = self._client, self._rpc
        if client is None or rpc_method is None:
            raise ToolAttemptNotClaimedError(
                "no Dex client in this Worker: call AgentSessionFlow.use_worker_client(client) "
                "so a single-attempt tool can claim its start"
            )
        key = request.tool_call_id
        options = RPCInvokeOptions(
            lock_attribute_map_instances=(AGENT_TOOL_ATTEMPT_CLAIMS.lock(key),),
            load_attribute_map_instances=(
                AGENT_TOOL_ATTEMPT_CLAIMS.load(key),
                AGENT_TOOL_CALLS.load(key),
            ),
        )
        for delay in _LOCK_CONFLICT_DELAYS:
            try:
                output: str = await client.invoke_rpc(
                    rpc_method,
                    flow_id,
                    request.to_text(),
                    options=options,
                )
                break
            except RpcLockConflictError:
                await asyncio.sleep(delay)
        else:
            raise ToolAttemptNotClaimedError(
                f"the claim of tool call {key!r} met a lock conflict on every try"
            )
        value = json.loads(output)
        return AttemptClaimAnswer(value["answer"]), int(value["unstarted"])
