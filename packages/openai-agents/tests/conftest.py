"""The SDK exports traces to OpenAI by default; these tests run without network or API key."""

from agents import set_tracing_disabled

set_tracing_disabled(True)
