"""Small views of canonical traces that adapter tests assert on."""

from stash_ingest.traces import Trace


def roles(trace: Trace) -> list[str]:
    """The role of every step, in order."""
    return [step.role for step in trace.steps]


def called_tools(trace: Trace) -> list[str | None]:
    """The tools the assistant called, in order."""
    return [step.tool_name for step in trace.steps if step.role == "assistant" and step.tool_name]
