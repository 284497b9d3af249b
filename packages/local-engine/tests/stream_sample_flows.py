"""A Flow whose Step writes to a Stream while it runs, for Stream tests through the engine.

``ChatterFlow`` (Flow type ``"ChatterFlow"``, start Step ``Chatter``, input: a label):
writes ``"<label>:0"`` to the Stream ``chatter``, passes gate ``<label>.after-first``, writes
``"<label>:1"`` and ``"<label>:2"``, and completes with ``"<label>:done"``.

Registry spec for Worker child processes: ``stream_sample_flows:chatter_registry``.
"""

from __future__ import annotations

from collections.abc import Generator

import dex
from dex import (
    Context,
    Flow,
    PersistenceSchema,
    Registry,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    Stream,
)
from engine_test_support.gates import pass_gate

CHATTER_REGISTRY = "stream_sample_flows:chatter_registry"
CHATTER = Stream("chatter", str, 1 << 20)
"""The Stream; pass this exact object to Client Stream calls (with ``chatter_registry()``)."""


class Chatter(Step[str]):
    def execute(self, context: Context, input: str) -> Generator[StepOutput, None, StepDecision]:
        yield CHATTER.write(context, f"{input}:0")
        pass_gate(f"{input}.after-first")
        yield CHATTER.write(context, f"{input}:1")
        yield CHATTER.write(context, f"{input}:2")
        return dex.graceful_complete(f"{input}:done")


class ChatterFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Chatter())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(CHATTER)


def chatter_registry() -> Registry:
    return Registry([ChatterFlow()])
