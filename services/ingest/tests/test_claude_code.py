"""The Claude Code transcript adapter, on the real transcripts in tests/fixtures/real/claude-code."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.claude_code import looks_like_claude_code, parse_claude_code
from stash_ingest.adapters.reading import first_value
from stash_ingest.traces import Trace, validate_trace
from support.fixtures import REAL_FIXTURES, real_fixture
from support.traces import called_tools, roles

FIXTURES = (
    "claude-code/spotter-v2.1-tool-heavy.jsonl",
    "claude-code/spotter-v2.1-task-subagent-parent.jsonl",
    "claude-code/spotter-v2.1-compaction-window.jsonl",
    "claude-code/spotter-v2.1-sidechain-agent-a2898e3.jsonl",
    "claude-code/spotter-v2.1-sidechain-acompact-e1f845.jsonl",
    "claude-code/codemie-v2.1.4-interleaved-summaries.jsonl",
)
SPOTTER_SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"


def parse_fixture(name: str) -> Trace:
    traces = parse_claude_code(real_fixture(name))
    assert len(traces) == 1
    validate_trace(traces[0], name)
    return traces[0]


def line(**fields: Any) -> str:
    envelope = {"sessionId": "s-1", "uuid": f"u-{len(fields)}", "timestamp": "2026-01-02T03:04:05.678Z"}
    return json.dumps({**envelope, **fields})


def user(content: Any, **fields: Any) -> str:
    return line(type="user", message={"role": "user", "content": content}, **fields)


def assistant(message_id: str, *blocks: dict[str, Any], **fields: Any) -> str:
    message = {"id": message_id, "role": "assistant", "model": "claude-x", "content": list(blocks)}
    return line(type="assistant", message=message, **fields)


def transcript(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


# --- real fixtures ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_parse_is_deterministic_and_valid_on_every_fixture(name: str) -> None:
    first, second = parse_claude_code(real_fixture(name)), parse_claude_code(real_fixture(name))
    assert first == second
    validate_trace(first[0], name)
    assert all(step.metadata["timestamp"].endswith("+00:00") for step in first[0].steps)


def test_parse_tool_heavy_session_keeps_commands_interrupts_and_parallel_calls() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl")
    assert len(trace.steps) == 22
    assert Counter(roles(trace)) == {"user": 5, "system": 4, "assistant": 7, "tool": 6}
    assert called_tools(trace) == ["Bash", "Bash", "WebSearch", "Glob", "Read", "WebFetch"]
    assert trace.external_id == "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
    assert trace.title is None
    assert trace.metadata["agent"] == "claude-code"
    assert trace.metadata["version"] == "2.1.38"
    assert trace.metadata["git_branch"] == "master"
    assert trace.metadata["slug"] == "dazzling-imagining-barto"
    assert trace.metadata["model"] == "claude-opus-4-6"
    assert trace.metadata["cwd"] == "/home/marco/projects/spotter"
    first = trace.steps[0]
    assert (first.role, first.content) == ("user", "start phoenix in background")
    assert first.metadata["timestamp"] == "2026-02-10T22:57:54.684000+00:00"
    assert trace.steps[1].tool_input == {
        "command": "mix phx.server",
        "description": "Start Phoenix server in background",
        "run_in_background": True,
    }
    assert trace.steps[3].content.startswith("Phoenix server is starting in the background.")
    assert trace.steps[6].content == "[Request interrupted by user]"


def test_parse_tool_heavy_session_maps_meta_and_local_commands_to_system() -> None:
    steps = parse_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl").steps
    assert steps[7].role == "system" and steps[7].metadata["is_meta"] is True
    assert steps[7].content.startswith("<local-command-caveat>")
    assert steps[8].role == "user" and steps[8].content.startswith("<command-name>/mcp</command-name>")
    assert steps[9].role == "system" and steps[9].metadata["command_output"] is True
    assert [step.metadata.get("subtype") for step in steps[10:12]] == ["local_command", "local_command"]
    assert steps[11].content == "<local-command-stdout>MCP dialog dismissed</local-command-stdout>"


def test_parse_keeps_steps_in_the_order_their_lines_were_written() -> None:
    steps = parse_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl").steps
    # msg_01LbyjvsALGe2gMsTgDSj7e6: "\n\n", thinking, WebSearch, Glob on adjacent lines (a progress line follows),
    # then the Glob result is written before the WebSearch result.
    assert [(step.role, step.tool_name) for step in steps[13:17]] == [
        ("assistant", "WebSearch"),
        ("assistant", "Glob"),
        ("tool", "Glob"),
        ("tool", "WebSearch"),
    ]
    assert steps[13].tool_call_id == steps[16].tool_call_id == "toolu_01DKTWcKpZ2ksZQmoKKfxiw6"
    assert steps[13].metadata["reasoning"].startswith("The user wants me to research why scrolling")
    assert steps[15].content == "/home/marco/projects/spotter/assets/js/app.js"
    # msg_019BN3FRqb7NU4DgBN5jdsym: Read, its result, then the same response's WebFetch and its result.
    assert [(step.role, step.tool_name, step.tool_call_id) for step in steps[17:21]] == [
        ("assistant", "Read", "toolu_01VpPeBD2ziigLLpybShAGoU"),
        ("tool", "Read", "toolu_01VpPeBD2ziigLLpybShAGoU"),
        ("assistant", "WebFetch", "toolu_017Q5Sr8KaSgowYhbKXBnfV2"),
        ("tool", "WebFetch", "toolu_017Q5Sr8KaSgowYhbKXBnfV2"),
    ]


def test_parse_subagent_parent_keeps_task_result_and_skips_agent_progress() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl")
    assert len(trace.steps) == 43
    assert Counter(roles(trace)) == {"user": 3, "system": 1, "assistant": 23, "tool": 16}
    assert called_tools(trace) == [
        "WebFetch",
        *["WebSearch"] * 3,
        "Glob",
        "WebSearch",
        "Read",
        "WebSearch",
        "AskUserQuestion",
        "Task",
        "Write",
        "ExitPlanMode",
        *["Bash"] * 4,
    ]
    assert trace.external_id == "491e126e-1e71-469c-ade2-fcc8af567c74"
    assert trace.steps[0].content.startswith("<command-message>handgemacht:create-beads</command-message>")
    assert trace.steps[1].role == "system" and trace.steps[1].metadata["is_meta"] is True
    task = trace.steps[26]
    assert (task.role, task.tool_name, task.tool_call_id) == ("tool", "Task", "toolu_01Cz2Pnv7qNcnK1ZiocxWhQX")
    assert task.content.startswith("Excellent! Now I have all the information I need to draft the bead content.")
    # The subagent's own messages (progress lines) are not steps of the parent.
    assert not any(step.tool_call_id == "toolu_01LdecmEM8HVNM6T4ht7x8Gi" for step in trace.steps)
    assert trace.steps[-1].content.startswith("## Beads Created")


def test_parse_pairs_every_tool_result_with_its_call() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl")
    calls = {step.tool_call_id: step.tool_name for step in trace.steps if step.role == "assistant" and step.tool_name}
    results = [step for step in trace.steps if step.role == "tool"]
    assert len(results) == len(calls) == 16
    assert all(calls[result.tool_call_id] == result.tool_name for result in results)


def test_parse_puts_a_result_written_between_parallel_calls_between_them() -> None:
    steps = parse_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl").steps
    # msg_01LvWnndr3MWQW8w3xEieBJx: four tool_use lines in a row, then the four results.
    assert steps[2].content == "I'll research the setup options and then draft beads for you."
    assert steps[2].metadata["reasoning"].startswith("Let me research the fastest way to set up Credo")
    assert [step.tool_name for step in steps[3:7]] == ["WebFetch", "WebSearch", "WebSearch", "WebSearch"]
    assert [step.role for step in steps[7:11]] == ["tool"] * 4
    # msg_01FqB3YigWWkQYHv4wfbcsgM: the Glob result is written before the response's second tool_use line.
    assert steps[11].content.startswith("Let me check the current project state")
    assert steps[11].metadata["reasoning"].startswith("Now let me check the current project's mix.exs")
    assert [(step.role, step.tool_name, step.tool_call_id) for step in steps[12:16]] == [
        ("assistant", "Glob", "toolu_01MumzJGYTo26Ds3LsuSkd5Z"),
        ("tool", "Glob", "toolu_01MumzJGYTo26Ds3LsuSkd5Z"),
        ("assistant", "WebSearch", "toolu_01CkmsUg9TVXxxnkGnRKFVNk"),
        ("tool", "WebSearch", "toolu_01CkmsUg9TVXxxnkGnRKFVNk"),
    ]
    assert "reasoning" not in steps[14].metadata
    # msg_01Dy5b5mdcWSvP7qDHigo9eo: two Bash lines with only hook progress between them stay together.
    assert [(step.role, step.tool_call_id) for step in steps[36:40]] == [
        ("assistant", "toolu_01QAoBrMN6wkULkVPWiqotBU"),
        ("assistant", "toolu_011M8RRpDyyej4gUFf7q2zv8"),
        ("tool", "toolu_01QAoBrMN6wkULkVPWiqotBU"),
        ("tool", "toolu_011M8RRpDyyej4gUFf7q2zv8"),
    ]


def test_parse_compaction_keeps_summary_as_system_step() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-compaction-window.jsonl")
    assert len(trace.steps) == 17
    assert Counter(roles(trace)) == {"tool": 6, "assistant": 10, "system": 1}
    assert called_tools(trace) == ["Write", "Write", "Edit", "Read", "Edit"]
    assert trace.external_id == SPOTTER_SESSION
    # The window starts with a result whose call lies outside the file.
    assert (trace.steps[0].tool_call_id, trace.steps[0].tool_name) == ("toolu_011tRJjkk5WZSkykxJkpxfwT", None)
    summary = trace.steps[7]
    assert summary.role == "system" and summary.metadata["compact_summary"] is True
    assert summary.content.startswith("This session is being continued from a previous conversation")
    assert summary.metadata["timestamp"] == "2026-02-12T20:30:28.504000+00:00"
    assert not any(step.content == "Conversation compacted" for step in trace.steps)
    after = trace.steps[8]
    assert after.content.startswith("Continuing with spotter-dov.3.")
    assert after.metadata["reasoning"].startswith("Let me continue working on spotter-dov.3.")


def test_parse_subagent_file_is_its_own_trace_with_errors() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-sidechain-agent-a2898e3.jsonl")
    assert trace.external_id == f"{SPOTTER_SESSION}:agent-a2898e3"
    assert trace.metadata["agent_id"] == "a2898e3"
    assert trace.metadata["model"] == "claude-sonnet-4-5-20250929"
    assert len(trace.steps) == 45
    assert Counter(roles(trace)) == {"user": 1, "assistant": 24, "tool": 20}
    assert Counter(called_tools(trace)) == {"Read": 13, "Glob": 8}
    assert trace.steps[0].content.startswith("Very thorough exploration. I need to understand:")
    errors = [step for step in trace.steps if step.metadata.get("is_error")]
    assert len(errors) == 8
    assert errors[0].content == "<tool_use_error>File does not exist.</tool_use_error>"
    assert {step.content for step in errors[1:]} == {"<tool_use_error>Sibling tool call errored</tool_use_error>"}
    # msg_016xcKQRzQXv2gLKoiSyUZxc: nine Read lines, each result written right after its call.
    assert [step.role for step in trace.steps[1:20]] == ["assistant"] + ["assistant", "tool"] * 9
    assert [step.tool_call_id for step in trace.steps[4:6]] == ["toolu_01TfDS8UjxxjY4dzV8esUMzm"] * 2
    assert trace.steps[5].metadata["is_error"] is True
    # The file was cut after the last Read call: no result for it.
    assert trace.steps[-1].tool_call_id == "toolu_01TQM4GqassfhiRMiNN5bAke"
    assert trace.steps[-1].tool_name == "Read"
    assert [step.role for step in trace.steps if step.tool_call_id == "toolu_01TQM4GqassfhiRMiNN5bAke"] == ["assistant"]


def test_parse_compaction_sidechain_maps_hook_reminders_to_system() -> None:
    trace = parse_fixture("claude-code/spotter-v2.1-sidechain-acompact-e1f845.jsonl")
    assert trace.external_id == f"{SPOTTER_SESSION}:agent-acompact-e1f845"
    assert roles(trace) == ["system", "system", "system", "user", "assistant"]
    assert all(step.metadata["is_meta"] and step.content.startswith("<system-reminder>") for step in trace.steps[:3])
    assert trace.steps[3].content.startswith("Your task is to create a detailed summary of the conversation so far")
    assert trace.steps[4].content.startswith("\n\n<analysis>\nLet me chronologically analyze the conversation")


def test_parse_interleaved_summaries_give_the_title_and_no_steps() -> None:
    trace = parse_fixture("claude-code/codemie-v2.1.4-interleaved-summaries.jsonl")
    assert trace.title == "Cleared conversation history"
    assert len(trace.steps) == 15
    assert Counter(roles(trace)) == {"user": 4, "assistant": 8, "tool": 3}
    assert called_tools(trace) == ["Write", "Task", "Task"]
    assert not any("Session File Analysis" in step.content for step in trace.steps)
    assert trace.steps[0].content == "show tools and store response in file"
    # The response's text and Write lines have 12 summary lines between them: they stay together.
    assert trace.steps[1].content == "I'll show you all the available tools and store the response in a file."
    assert trace.steps[2].tool_call_id == "toolu_bdrk_01SKk2dM5q1c8gecaoatnwJn"
    rejected = trace.steps[3]
    assert (rejected.role, rejected.tool_name, rejected.metadata["is_error"]) == ("tool", "Write", True)
    assert rejected.content.startswith("The user doesn't want to proceed with this tool use.")
    assert trace.steps[4].content == "[Request interrupted by user for tool use]"
    assert trace.steps[8].content.startswith("Perfect! Now I have a comprehensive understanding of the codebase.")
    assert trace.steps[-1].content.startswith("Excellent! Here's what I discovered in the deeper exploration:")


# --- growing snapshots --------------------------------------------------------------------------


def test_fixtures_cover_every_claude_code_file() -> None:
    assert set(FIXTURES) == {f"claude-code/{path.name}" for path in (REAL_FIXTURES / "claude-code").iterdir()}


@pytest.mark.parametrize("name", FIXTURES)
def test_parse_of_a_snapshot_cut_at_any_line_gives_a_prefix_of_the_steps(name: str) -> None:
    raw = real_fixture(name)
    lines = raw.splitlines(keepends=True)
    full = parse_claude_code(raw)[0]
    previous: Trace | None = None
    for cut in range(1, len(lines) + 1):
        try:
            partial = parse_claude_code(b"".join(lines[:cut]))[0]
        except InvalidArgument:
            assert previous is None, f"cut after {cut} lines fails where a shorter cut parsed"
            continue  # nothing reviewable yet (no step, or only system steps)
        assert full.steps[: len(partial.steps)] == partial.steps, f"cut after {cut} lines"
        assert partial.external_id == full.external_id
        if previous is not None:
            assert partial.steps[: len(previous.steps)] == previous.steps, f"cut after {cut} lines"
        previous = partial
    assert previous is not None and previous.steps == full.steps


def test_parse_ignores_a_last_line_caught_mid_write() -> None:
    whole = transcript(user("hello"), assistant("m1", {"type": "text", "text": "hi"}))
    torn = whole[:-20]
    assert parse_claude_code(torn)[0].steps == parse_claude_code(whole)[0].steps[:1]


def test_parse_attaches_thinking_only_to_a_later_step_synthetic() -> None:
    raw = transcript(
        user("go"),
        assistant("m1", {"type": "text", "text": "First."}),
        assistant("m1", {"type": "thinking", "thinking": "why", "signature": "x"}),
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}),
    )
    steps = parse_claude_code(raw)[0].steps
    assert "reasoning" not in steps[1].metadata
    assert steps[2].metadata["reasoning"] == "why"


def test_parse_opens_a_new_slot_when_a_response_continues_after_a_result_synthetic() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "Glob", "input": {}}
    second = {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}
    raw = transcript(
        user("go"),
        assistant("m1", call),
        assistant("m1", {"type": "thinking", "thinking": "then read", "signature": "x"}),
        user([{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]),
        assistant("m1", second),
        user([{"type": "tool_result", "tool_use_id": "t2", "content": "print()"}]),
    )
    steps = parse_claude_code(raw)[0].steps
    assert [(step.role, step.tool_call_id) for step in steps] == [
        ("user", None),
        ("assistant", "t1"),
        ("tool", "t1"),
        ("assistant", "t2"),
        ("tool", "t2"),
    ]
    # Thinking read before the gap goes to the response's next step, after the gap.
    assert steps[3].metadata["reasoning"] == "then read"
    assert "reasoning" not in steps[1].metadata


# --- synthetic gaps -----------------------------------------------------------------------------


def test_parse_marks_string_tool_use_result_as_error_synthetic() -> None:
    raw = transcript(
        user("go"),
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "Edit", "input": {}}),
        user([{"type": "tool_result", "tool_use_id": "t1", "content": "User rejected"}], toolUseResult="User rejected"),
    )
    result = parse_claude_code(raw)[0].steps[-1]
    assert (result.role, result.tool_name, result.metadata["is_error"]) == ("tool", "Edit", True)


def test_parse_writes_images_as_placeholders_synthetic() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    linked = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "shot"}, image]}
    raw = transcript(
        user([{"type": "text", "text": "look"}, image, linked]),
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "Screenshot", "input": {}}),
        user([result]),
    )
    steps = parse_claude_code(raw)[0].steps
    assert steps[0].content == "look\n[image]\n[image: https://example.com/a.png]"
    assert steps[2].content == "shot\n[image]"
    assert not any("iVBOR" in step.content for step in steps)


def test_parse_splits_tool_results_from_text_in_one_user_line_synthetic() -> None:
    raw = transcript(
        user("go"),
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}),
        user([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}, {"type": "text", "text": "now stop"}]),
    )
    assert [(step.role, step.content) for step in parse_claude_code(raw)[0].steps[2:]] == [
        ("tool", "ok"),
        ("user", "now stop"),
    ]


def test_parse_skips_inline_sidechain_lines_of_old_versions_synthetic() -> None:
    raw = transcript(
        user("main question", isSidechain=False),
        user("subagent prompt", isSidechain=True),
        assistant("m9", {"type": "text", "text": "subagent answer"}, isSidechain=True),
        assistant("m1", {"type": "text", "text": "main answer"}, isSidechain=False),
    )
    trace = parse_claude_code(raw)[0]
    assert [step.content for step in trace.steps] == ["main question", "main answer"]
    assert trace.external_id == "s-1"


def test_parse_prefers_custom_title_over_summaries_synthetic() -> None:
    raw = transcript(
        json.dumps({"type": "summary", "summary": "Old summary", "leafUuid": "x"}),
        user("hi"),
        json.dumps({"type": "custom-title", "customTitle": "My rename", "sessionId": "s-1"}),
        json.dumps({"type": "summary", "summary": "Later summary", "leafUuid": "y"}),
    )
    assert parse_claude_code(raw)[0].title == "My rename"


def test_parse_keeps_line_separators_inside_strings_synthetic() -> None:
    text = "one\u2028two\u2029three"
    raw = transcript(user(text), assistant("m1", {"type": "text", "text": "ok"}))
    assert parse_claude_code(raw)[0].steps[0].content == text


def test_parse_sums_usage_once_per_response_synthetic() -> None:
    usage = {"input_tokens": 3, "output_tokens": 7, "cache_read_input_tokens": 10}
    first = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "a"}], "usage": usage}
    second = {**first, "content": [{"type": "text", "text": "b"}]}
    raw = transcript(user("go"), line(type="assistant", message=first), line(type="assistant", message=second))
    assert parse_claude_code(raw)[0].metadata["usage"] == {
        "input_tokens": 3,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 10,
    }


# --- bad input ----------------------------------------------------------------------------------


def test_parse_rejects_a_line_that_is_not_an_object() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: expected a JSON object"):
        parse_claude_code(transcript(user("hi"), "[1, 2]"))


def test_parse_rejects_a_line_without_type() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 1: type: expected a line type"):
        parse_claude_code(transcript(json.dumps({"sessionId": "s-1", "message": {"content": "hi"}})))


def test_parse_rejects_a_user_line_without_message() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: message: a user line needs a message object"):
        parse_claude_code(transcript(user("hi"), line(type="user")))


def test_parse_rejects_invalid_json_naming_the_line() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: is not valid JSON"):
        parse_claude_code(transcript(user("hi"), "{not json"))


def test_parse_rejects_a_transcript_without_messages() -> None:
    codex_line = json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x"}})
    with pytest.raises(InvalidArgument, match=r"^transcript: steps: no user or assistant message found"):
        parse_claude_code(transcript(codex_line))


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_looks_like_claude_code_accepts_every_fixture(name: str) -> None:
    assert looks_like_claude_code(first_value(real_fixture(name)))


@pytest.mark.parametrize(
    "value",
    [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x"}},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {"resourceSpans": []},
        {"steps": [{"role": "user", "content": "hi"}]},
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        {"type": {"nested": True}, "sessionId": "s"},
        [{"type": "user", "sessionId": "s"}],
        None,
        "text",
    ],
)
def test_looks_like_claude_code_rejects_other_shapes(value: Any) -> None:
    assert not looks_like_claude_code(value)
