"""The Codex rollout adapter, on the real rollouts in tests/fixtures/real/codex."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.codex import looks_like_codex, parse_codex
from stash_ingest.adapters.reading import first_value
from stash_ingest.traces import Trace, validate_trace
from support.fixtures import real_fixture
from support.traces import called_tools, roles

TUI = "codex/codemie-codex-tui-0.125-rollout.jsonl"
DESKTOP = "codex/codemie-codex-desktop-0.128-rollout.jsonl"
PARALLEL = "codex/localpush-codex-desktop-0.104-redacted-parallel-calls.jsonl"
COMPACTION = "codex/localpush-codex-desktop-0.104-redacted-compaction-images.jsonl"
FIXTURES = (TUI, DESKTOP, PARALLEL, COMPACTION)


def parse_fixture(name: str) -> Trace:
    traces = parse_codex(real_fixture(name))
    assert len(traces) == 1
    validate_trace(traces[0], name)
    return traces[0]


def record(kind: str, payload: dict[str, Any], at: str = "2026-01-02T03:04:05.678Z") -> str:
    return json.dumps({"timestamp": at, "type": kind, "payload": payload})


def item(payload: dict[str, Any]) -> str:
    return record("response_item", payload)


def message(role: str, text: str, **fields: Any) -> str:
    kind = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}], **fields})


def user_event(text: str, **fields: Any) -> str:
    return record("event_msg", {"type": "user_message", "message": text, "images": [], **fields})


def call(call_id: str, name: str = "exec_command", arguments: str = '{"cmd": "ls"}') -> str:
    return item({"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id})


def output(call_id: str, text: str, kind: str = "function_call_output") -> str:
    return item({"type": kind, "call_id": call_id, "output": text})


META = record("session_meta", {"id": "sess-1", "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.99.0"})


def rollout(*lines: str) -> bytes:
    return ("\n".join([META, *lines]) + "\n").encode()


# --- real fixtures ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_parse_is_deterministic_and_valid_on_every_fixture(name: str) -> None:
    first, second = parse_codex(real_fixture(name)), parse_codex(real_fixture(name))
    assert first == second
    validate_trace(first[0], name)
    assert all(step.metadata["timestamp"].endswith("+00:00") for step in first[0].steps)


@pytest.mark.parametrize("name", FIXTURES)
def test_parse_pairs_every_output_with_an_earlier_call(name: str) -> None:
    steps = parse_fixture(name).steps
    calls: dict[str | None, str | None] = {}
    for step in steps:
        if step.role == "assistant" and step.tool_name:
            calls[step.tool_call_id] = step.tool_name
        if step.role == "tool":
            assert step.tool_call_id in calls
            assert step.tool_name == calls[step.tool_call_id]


def test_parse_tui_rollout_reads_response_items_once() -> None:
    trace = parse_fixture(TUI)
    assert len(trace.steps) == 54
    assert Counter(roles(trace)) == {"system": 2, "user": 1, "assistant": 30, "tool": 21}
    assert Counter(called_tools(trace)) == {
        "exec_command": 8,
        "write_stdin": 10,
        "update_plan": 1,
        "apply_patch": 3,
        "web_search": 3,
    }
    assert trace.external_id == "019e1625-789d-76c0-80ab-3724b5ddb799"
    assert trace.title is None
    assert trace.metadata["agent"] == "codex"
    assert trace.metadata["originator"] == "codex-tui"
    assert trace.metadata["cli_version"] == "0.125.0"
    assert trace.metadata["model_provider"] == "openai"
    assert trace.metadata["model"] == "gpt-5.5"
    assert trace.metadata["cwd"] == "/Users/Sample_User/repos/codemie-ai/codemie-code"
    assert trace.metadata["usage"]["total_tokens"] == 3501832
    assert not any("You are Codex" in step.content for step in trace.steps)  # base_instructions


def test_parse_tui_rollout_maps_developer_and_agents_md_to_system() -> None:
    steps = parse_fixture(TUI).steps
    assert steps[0].role == "system" and steps[0].content.startswith("<permissions instructions>")
    assert steps[1].role == "system" and steps[1].metadata["is_meta"] is True
    assert steps[1].content.startswith("# AGENTS.md instructions for /Users/Sample_User/repos/codemie-ai/codemie-code")
    assert (steps[2].role, steps[2].content) == ("user", "show tools")
    assert steps[2].metadata["timestamp"] == "2026-05-11T08:27:17.494000+00:00"
    assert steps[7].content.startswith("Available tool groups in this session:")
    assert steps[7].metadata["phase"] == "final_answer"


def test_parse_tui_rollout_reads_exec_outputs_and_exit_codes() -> None:
    steps = parse_fixture(TUI).steps
    first_call, first_result = steps[3], steps[4]
    assert first_call.tool_input["cmd"].startswith("sed -n '1,180p' /Users/Sample_User/.codex/plugins/cache/")
    assert first_call.tool_call_id == first_result.tool_call_id == "call_Y2p6KmqwoTtpi6atpDPuxC5M"
    assert first_result.content.startswith("Chunk ID: a21e41\nWall time: 1.0037 seconds\nProcess running")
    assert "exit_code" not in first_result.metadata
    assert steps[6].metadata["exit_code"] == 0
    failed = [step for step in steps if step.metadata.get("is_error")]
    assert [(step.tool_call_id, step.metadata["exit_code"]) for step in failed] == [
        ("call_Bl9T10SnkFx3d7cIuJXmzy4Y", 1),
        ("call_PAoFGDC6cPakVp8JImcOm2uB", 1),
    ]


def test_parse_tui_rollout_reads_apply_patch_and_web_search() -> None:
    steps = parse_fixture(TUI).steps
    patch, result = steps[41], steps[42]
    assert (patch.tool_name, patch.tool_call_id) == ("apply_patch", "call_0gOiGGSkJEBvvlrXtBn0xzwL")
    assert list(patch.tool_input) == ["input"]
    assert patch.tool_input["input"].startswith(
        "*** Begin Patch\n*** Update File: src/agents/plugins/__tests__/codemie-code-reasoning.test.ts\n"
    )
    assert result.content == (
        "Success. Updated the following files:\nM src/agents/plugins/__tests__/codemie-code-reasoning.test.ts\n"
    )
    assert result.metadata["exit_code"] == 0 and "is_error" not in result.metadata
    search = steps[8]
    assert (search.role, search.content, search.tool_name, search.tool_call_id) == ("assistant", "", "web_search", None)
    assert search.tool_input["query"] == (
        "OpenCode config compact context percentage compact threshold env var OPENCODE_CONFIG_CONTENT"
    )
    # The file ends with a patch call whose output was not written yet.
    assert (steps[-1].tool_name, steps[-1].tool_call_id) == ("apply_patch", "call_kOisxAYIbsLzuTGB7Zfirx89")


def test_parse_desktop_rollout_reads_user_input_from_events() -> None:
    trace = parse_fixture(DESKTOP)
    assert len(trace.steps) == 27
    assert Counter(roles(trace)) == {"user": 3, "assistant": 13, "tool": 11}
    assert called_tools(trace) == ["exec_command"] * 11
    assert trace.external_id == "019e1695-0522-7c83-8b39-0dd379793f80"
    assert trace.metadata["originator"] == "Codex Desktop"
    assert trace.metadata["source"] == "vscode"
    assert "model" not in trace.metadata  # no turn_context in this file
    users = [step for step in trace.steps if step.role == "user"]
    assert users[0].content.startswith("\n# Files mentioned by the user:\n\n## Sample Project Demo Prep.vtt")
    assert users[0].metadata["timestamp"] == "2026-05-11T10:29:40.167000+00:00"
    assert (
        users[1].content
        == "there is a need for nikita to draft demo scenario around governance, budgetings, analytics\n"
    )
    assert [step.role for step in trace.steps[7:15]] == ["assistant"] * 4 + ["tool"] * 4
    assert trace.steps[23].content.startswith("I analyzed `/Users/Sample_User/Downloads/Sample Project Demo Prep.vtt`.")
    assert trace.steps[-1].role == "user"


def test_parse_parallel_calls_stay_consecutive_with_reasoning_on_the_message() -> None:
    trace = parse_fixture(PARALLEL)
    assert len(trace.steps) == 34
    assert Counter(roles(trace)) == {"system": 4, "user": 3, "assistant": 16, "tool": 11}
    assert called_tools(trace) == ["exec_command"] * 12
    # Redaction hid the AGENTS.md / environment_context prefixes, so only developer messages are system.
    assert roles(trace)[:7] == ["system", "system", "user", "user", "system", "system", "user"]
    assert trace.steps[6].content == "[REDACTED_TEXT len=64 sha=7d538904]"  # not repeated from the event
    assert [step.role for step in trace.steps[7:14]] == ["assistant"] * 4 + ["tool"] * 3
    commentary = trace.steps[7]
    assert commentary.metadata["reasoning"] == "[REDACTED_TEXT len=32 sha=9759baf3]"
    assert commentary.metadata["phase"] == "commentary"
    assert [step.tool_call_id for step in trace.steps[15:19]] == [step.tool_call_id for step in trace.steps[19:23]]
    assert trace.steps[-1].tool_call_id == "call_F71m3tvmbKfZ18OnsLK6pF3z"
    assert trace.metadata["model"] == "gpt-5.3-codex"


def test_parse_compaction_keeps_recorded_steps_and_adds_no_replacement_history() -> None:
    trace = parse_fixture(COMPACTION)
    assert len(trace.steps) == 32
    assert Counter(roles(trace)) == {"assistant": 19, "user": 1, "tool": 11, "system": 1}
    assert called_tools(trace) == ["exec_command"] * 6 + ["apply_patch"] * 4 + ["exec_command"] * 3
    assert trace.steps[0].metadata["phase"] == "final_answer"  # the window starts mid-turn
    assert not any("len=7665" in step.content for step in trace.steps)  # a replacement_history message
    summary = trace.steps[26]
    assert summary.role == "system" and summary.metadata["compact_summary"] is True
    assert summary.content == "[REDACTED_MESSAGE len=0 sha=e3b0c442]"  # redacted from an empty message
    assert trace.steps[27].metadata["reasoning"] == "[REDACTED_TEXT len=38 sha=54d3152d]"


def test_parse_compaction_rollout_writes_the_image_as_a_placeholder() -> None:
    user = parse_fixture(COMPACTION).steps[1]
    assert user.role == "user"
    assert user.content == (
        "[REDACTED_TEXT len=1533 sha=89386347]\n[REDACTED_TEXT len=7 sha=92b00aa2]\n[image]\n"
        "[REDACTED_TEXT len=8 sha=74dc9557]"
    )


# --- growing snapshots --------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_parse_of_a_shorter_snapshot_gives_a_prefix_of_the_steps(name: str) -> None:
    raw = real_fixture(name)
    lines = [text for text in raw.split(b"\n") if text.strip()]
    full = parse_codex(raw)[0]
    compared = 0
    for cut in range(1, len(lines)):
        try:
            partial = parse_codex(b"\n".join(lines[:cut]) + b"\n")[0]
        except InvalidArgument:
            continue  # nothing reviewable yet (no step, or only system steps)
        assert full.steps[: len(partial.steps)] == partial.steps, f"cut after {cut} lines"
        assert partial.external_id == full.external_id
        compared += 1
    assert compared >= len(lines) - 10


def test_parse_ignores_a_last_line_caught_mid_write() -> None:
    whole = rollout(message("user", "hi"), message("assistant", "hello"))
    assert parse_codex(whole[:-15])[0].steps == parse_codex(whole)[0].steps[:1]


def test_parse_attaches_reasoning_only_to_the_next_assistant_step_synthetic() -> None:
    summary = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "content": None}
    steps = parse_codex(
        rollout(
            message("user", "go"),
            message("assistant", "Looking."),
            item(summary),
            call("c1"),
            item({**summary, "summary": [{"type": "summary_text", "text": "abandoned"}]}),
            message("user", "stop"),
            message("assistant", "Stopped."),
        )
    )[0].steps
    assert [step.metadata.get("reasoning") for step in steps] == [None, None, "plan", None, None]


# --- synthetic gaps -----------------------------------------------------------------------------


def test_parse_maps_injected_user_context_to_system_synthetic() -> None:
    steps = parse_codex(
        rollout(
            message("developer", "<permissions instructions>sandboxed</permissions instructions>"),
            message("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be nice</INSTRUCTIONS>"),
            message("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
            message("user", "fix the bug"),
            user_event("fix the bug"),
            message("assistant", "Done."),
        )
    )[0].steps
    assert [(step.role, step.metadata.get("is_meta")) for step in steps] == [
        ("system", None),
        ("system", True),
        ("system", True),
        ("user", None),
        ("assistant", None),
    ]


def test_parse_reads_user_input_once_whichever_stream_comes_first_synthetic() -> None:
    steps = parse_codex(
        rollout(
            user_event("first"),
            message("user", "first"),
            message("assistant", "one"),
            message("user", "again"),
            user_event("again"),
            message("assistant", "two"),
            user_event("again"),
            message("assistant", "three"),
        )
    )[0].steps
    assert [(step.role, step.content) for step in steps] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "again"),
        ("assistant", "two"),
        ("user", "again"),
        ("assistant", "three"),
    ]


def test_parse_unwraps_json_output_and_flags_nonzero_exit_synthetic() -> None:
    wrapped = json.dumps({"output": "patch failed", "metadata": {"exit_code": 1, "duration_seconds": 0.1}})
    steps = parse_codex(
        rollout(
            message("user", "go"),
            item({"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "*** Begin Patch"}),
            output("p1", wrapped, kind="custom_tool_call_output"),
            call("c1"),
            output("c1", "Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom"),
            call("c2"),
            output("c2", "Chunk ID: 1\nProcess exited with code 0\nOutput:\nProcess exited with code 1\n"),
            call("c3", name="read_file"),
            output("c3", "Process exited with code 1"),
        )
    )[0].steps
    assert steps[1].tool_input == {"input": "*** Begin Patch"}
    assert (steps[2].content, steps[2].tool_name, steps[2].metadata["exit_code"]) == ("patch failed", "apply_patch", 1)
    assert steps[2].metadata["is_error"] is True
    assert (steps[4].metadata["exit_code"], steps[4].metadata["is_error"]) == (2, True)
    assert steps[6].metadata["exit_code"] == 0 and "is_error" not in steps[6].metadata
    assert "exit_code" not in steps[8].metadata  # no exec header: plain output text


def test_parse_writes_images_as_placeholders_synthetic() -> None:
    image_message = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "see"},
            {"type": "input_text", "text": "<image>"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_text", "text": "</image>"},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
        ],
    }
    steps = parse_codex(
        rollout(
            item(image_message),
            message("assistant", "ok"),
            user_event("and this", images=["data:image/png;base64,iVBORw0KGgo="]),
            message("assistant", "ok"),
        )
    )[0].steps
    assert steps[0].content == "see\n[image]\n[image: https://example.com/a.png]"
    assert steps[2].content == "and this\n[image]"
    assert not any("base64" in step.content for step in steps)


def test_parse_compacted_with_summary_adds_one_system_step_synthetic() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "went"}]},
    ]
    steps = parse_codex(
        rollout(
            message("user", "go"),
            message("assistant", "went"),
            record("compacted", {"message": "Summary: we went.", "replacement_history": history}),
            record("compacted", {"message": "", "replacement_history": history}),
            message("assistant", "next"),
        )
    )[0].steps
    assert [(step.role, step.content) for step in steps] == [
        ("user", "go"),
        ("assistant", "went"),
        ("system", "Summary: we went."),
        ("assistant", "next"),
    ]
    assert steps[2].metadata["compact_summary"] is True


def test_parse_prefixes_mcp_namespace_and_reads_local_shell_synthetic() -> None:
    steps = parse_codex(
        rollout(
            message("user", "go"),
            item(
                {
                    "type": "function_call",
                    "namespace": "mcp__node_repl__",
                    "name": "js",
                    "arguments": "{}",
                    "call_id": "j",
                }
            ),
            output("j", "Wall time: 1 seconds\nOutput:\n[]"),
            item({"type": "local_shell_call", "call_id": "s", "action": {"type": "exec", "command": ["ls"]}}),
            output("s", "a.txt"),
        )
    )[0].steps
    assert [step.tool_name for step in steps[1:]] == [
        "mcp__node_repl__js",
        "mcp__node_repl__js",
        "local_shell",
        "local_shell",
    ]
    assert steps[3].tool_input == {"type": "exec", "command": ["ls"]}


def test_parse_reads_legacy_rollouts_without_envelope_synthetic() -> None:
    raw = "\n".join(
        [
            json.dumps({"id": "legacy-1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None, "git": {}}),
            json.dumps({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
            json.dumps({"record_type": "state"}),
            json.dumps({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}),
        ]
    ).encode()
    trace = parse_codex(raw)[0]
    assert trace.external_id == "legacy-1"
    assert [(step.role, step.content) for step in trace.steps] == [("user", "hi"), ("assistant", "yo")]


def test_parse_keeps_line_separators_inside_strings_synthetic() -> None:
    text = "one\u2028two\u2029three"
    assert parse_codex(rollout(message("user", text), message("assistant", "ok")))[0].steps[0].content == text


# --- bad input ----------------------------------------------------------------------------------


def test_parse_rejects_a_line_that_is_not_an_object() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: expected a JSON object"):
        parse_codex(rollout('"text"'))


def test_parse_rejects_a_line_of_another_format() -> None:
    claude_line = json.dumps({"sessionId": "s", "uuid": "u", "message": {"role": "user", "content": "hi"}})
    with pytest.raises(InvalidArgument, match=r"^line 2: type: expected a Codex rollout line"):
        parse_codex(rollout(claude_line))


def test_parse_rejects_a_payload_that_is_not_an_object() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: payload: expected an object"):
        parse_codex(rollout(json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": []})))


def test_parse_rejects_an_unknown_message_role() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: payload.role: expected user, assistant or developer"):
        parse_codex(rollout(message("robot", "beep")))


def test_parse_rejects_invalid_json_naming_the_line() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: is not valid JSON"):
        parse_codex(rollout("{not json"))


def test_parse_rejects_a_rollout_without_messages() -> None:
    with pytest.raises(InvalidArgument, match=r"^rollout: steps: no message or tool call found"):
        parse_codex(rollout(record("event_msg", {"type": "token_count", "info": None})))


def test_parse_refuses_an_unresolved_history_page() -> None:
    first, rest = real_fixture(COMPACTION).split(b"\n", 1)
    meta = json.loads(first)
    meta["payload"]["history_base"] = {"thread_id": "0199", "end_ordinal_exclusive": 4, "end_byte_offset": 900}

    with pytest.raises(InvalidArgument, match="line 1: payload.history_base: an unresolved Codex history page"):
        parse_codex(json.dumps(meta).encode() + b"\n" + rest)


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_looks_like_codex_accepts_every_fixture(name: str) -> None:
    assert looks_like_codex(first_value(real_fixture(name)))


@pytest.mark.parametrize(
    "value",
    [
        {"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"resourceSpans": []},
        {"steps": []},
        {"type": "response_item", "payload": "text"},
        {"type": ["response_item"], "payload": {}},
        None,
        [],
    ],
)
def test_looks_like_codex_rejects_other_shapes(value: Any) -> None:
    assert not looks_like_codex(value)
