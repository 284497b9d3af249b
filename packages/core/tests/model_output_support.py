"""A model output writer that records what a model client streamed, for model client tests."""

from __future__ import annotations


class RecordingModelOutput:
    """A ``ModelOutputWriter`` that keeps every text and reasoning delta, in order."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []

    def write_text_delta(self, text: str) -> None:
        self.text.append(text)

    def write_reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)
