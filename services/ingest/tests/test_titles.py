"""Derived titles of traces that arrive without one, on real recordings."""

from __future__ import annotations

from stash_ingest.adapters.claude_code import parse_claude_code
from stash_ingest.adapters.codex import parse_codex
from stash_ingest.titles import derive_title
from stash_ingest.traces import Step, Trace
from support.fixtures import real_fixture


def test_a_claude_code_slash_command_is_titled_by_its_name_not_its_markup() -> None:
    (trace,) = parse_claude_code(real_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl"))

    assert trace.title is None
    assert derive_title(trace) == "/handgemacht:create-beads"


def test_a_codex_desktop_request_is_titled_by_the_request_after_its_attachments() -> None:
    (trace,) = parse_codex(real_fixture("codex/codemie-codex-desktop-0.128-rollout.jsonl"))

    assert derive_title(trace) == "analyze trascript and summarzie action items related to codemie and demo…"


def test_a_long_request_is_cut_at_a_word_and_markup_only_messages_are_passed_over() -> None:
    request = "Please " + "rename every config file in the repository " * 4
    trace = Trace(
        steps=(
            Step(role="user", content="<local-command-stdout></local-command-stdout>"),
            Step(role="user", content=request),
        )
    )

    title = derive_title(trace)

    assert title.endswith("…") and len(title) <= 80 and request.startswith(title[:-1])


def test_a_trace_without_user_text_takes_its_first_message_and_an_empty_one_a_placeholder() -> None:
    assert (
        derive_title(Trace(steps=(Step(role="assistant", content="\n\nChecking the logs."),))) == "Checking the logs."
    )
    assert derive_title(Trace(steps=(Step(role="assistant", content=" "),))) == "Untitled trace"
