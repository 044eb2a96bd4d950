"""Deriving trajectory events from a trace's steps: synthetic Claude Code and Codex traces, and the real fixtures."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf import json_format

from stash.rm.v1 import common_pb2
from stash_common.step_messages import step_from_proto
from stash_common.steps import TraceStep
from stash_ingest.adapters.registry import ADAPTERS
from stash_labeler.prm.events import EPOCH, TrajectoryEvent, events_from_steps, steps_covered
from stash_labeler.prm.trajectory import TaskLog
from support.fixtures import real_fixture

T0 = datetime(2026, 2, 12, 16, 2, 51, tzinfo=UTC)
_PROTO_ROLES = {
    "system": common_pb2.STEP_ROLE_SYSTEM,
    "user": common_pb2.STEP_ROLE_USER,
    "assistant": common_pb2.STEP_ROLE_ASSISTANT,
    "tool": common_pb2.STEP_ROLE_TOOL,
}


def at(seconds: float) -> dict[str, Any]:
    return {"timestamp": (T0 + timedelta(seconds=seconds)).isoformat()}


def steps(*specs: tuple[Any, ...]) -> list[TraceStep]:
    """Steps from (role, content, tool_name, tool_input, tool_call_id, metadata) tuples, indexed in order."""
    built = []
    for index, (role, content, tool_name, tool_input, call_id, metadata) in enumerate(specs):
        built.append(TraceStep(f"step-{index}", index, role, content, tool_name, tool_input, call_id, metadata))
    return built


def call(tool: str, arguments: dict[str, Any], call_id: str | None, metadata: dict[str, Any]) -> tuple[Any, ...]:
    return ("assistant", "", tool, arguments, call_id, metadata)


def result(tool: str | None, call_id: str | None, metadata: dict[str, Any], content: str = "ok") -> tuple[Any, ...]:
    return ("tool", content, tool, None, call_id, metadata)


def as_tuples(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            item.tool_name,
            item.event.action,
            item.event.target_files,
            item.event.success,
            item.call_index,
            item.result_index,
        )
        for item in events
    ]


# --- Claude Code style ------------------------------------------------------------------------


def test_claude_code_read_edit_and_failing_bash_test() -> None:
    trace = steps(
        ("user", "fix the login bug", None, None, None, at(0)),
        call("Read", {"file_path": "/repo/app.py"}, "toolu_1", at(1)),
        result("Read", "toolu_1", at(1.5)),
        call("Edit", {"file_path": "/repo/app.py", "old_string": "a", "new_string": "b"}, "toolu_2", at(3)),
        result("Edit", "toolu_2", {**at(3.25), "is_error": True}, "<tool_use_error>String not found</tool_use_error>"),
        call("Bash", {"command": "pytest tests/test_app.py -q", "description": "Run tests"}, "toolu_3", at(4)),
        result("Bash", "toolu_3", {**at(16), "is_error": True}, "1 failed"),
        ("assistant", "The test still fails.", None, None, None, at(17)),
    )
    events = events_from_steps(trace)
    assert as_tuples(events) == [
        ("Read", "read", ("/repo/app.py",), True, 1, 2),
        ("Edit", "edit", ("/repo/app.py",), False, 3, 4),
        ("Bash", "test", ("tests/test_app.py",), False, 5, 6),
    ]
    assert [item.event.duration_s for item in events] == [0.5, 0.25, 12.0]
    assert [item.event.timestamp for item in events] == [T0 + timedelta(seconds=s) for s in (1, 3, 4)]
    assert {item.event.role for item in events} == {"agent"}
    assert (events[2].call_id, events[2].result_id) == ("step-5", "step-6")


def test_parallel_calls_pair_with_their_results_by_id() -> None:
    trace = steps(
        call("Read", {"file_path": "a.py"}, "toolu_a", at(0)),
        call("Read", {"file_path": "b.py"}, "toolu_b", at(0)),
        result("Read", "toolu_b", {**at(2), "is_error": True}),
        result("Read", "toolu_a", at(3)),
    )
    assert as_tuples(events_from_steps(trace)) == [
        ("Read", "read", ("a.py",), True, 0, 3),
        ("Read", "read", ("b.py",), False, 1, 2),
    ]


def test_calls_without_ids_take_the_next_result_of_the_same_tool() -> None:
    trace = steps(
        call("Grep", {"pattern": "x"}, None, at(0)),
        result("Read", None, at(0.5)),
        result("Grep", None, {**at(1), "is_error": True}),
        call("Grep", {"pattern": "y"}, None, at(2)),
        result("Grep", None, at(3)),
    )
    assert as_tuples(events_from_steps(trace)) == [
        ("Grep", "search", (), False, 0, 2),
        ("Grep", "search", (), True, 3, 4),
    ]


def test_a_call_without_result_succeeded_and_a_result_without_call_is_ignored() -> None:
    trace = steps(
        result("Read", "toolu_old", at(0)),  # answers a call from before a compaction
        call("Read", {"file_path": "a.py"}, "toolu_old", at(1)),
    )
    events = events_from_steps(trace)
    assert as_tuples(events) == [("Read", "read", ("a.py",), True, 1, None)]
    assert events[0].event.duration_s == 0.0


def test_role_comes_from_the_steps_agent_id_or_the_argument() -> None:
    trace = steps(
        call("Read", {"file_path": "a.py"}, "t1", {**at(0), "agent_id": "a2898e3"}),
        call("Read", {"file_path": "b.py"}, "t2", at(1)),
    )
    assert [item.event.role for item in events_from_steps(trace)] == ["a2898e3", "agent"]
    assert [item.event.role for item in events_from_steps(trace, role="explorer")] == ["a2898e3", "explorer"]


# --- Codex style ------------------------------------------------------------------------------


def test_codex_shell_exit_codes_and_apply_patch_headers() -> None:
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: src/b.py\n+z\n*** End Patch"
    trace = steps(
        call("shell", {"command": ["bash", "-lc", "pytest -q tests/test_a.py"], "workdir": "/repo"}, "call_1", at(0)),
        result("shell", "call_1", {**at(4), "exit_code": 1.0, "is_error": True}),
        call("apply_patch", {"input": patch}, "call_2", at(5)),
        result("apply_patch", "call_2", {**at(5.5), "exit_code": 0.0}),
        call("shell", {"command": ["bash", "-lc", "cat src/a.py"]}, "call_3", at(6)),
        result("shell", "call_3", {**at(6.5), "exit_code": "2"}),
    )
    assert as_tuples(events_from_steps(trace)) == [
        ("shell", "test", ("tests/test_a.py",), False, 0, 1),
        ("apply_patch", "edit", ("src/a.py", "src/b.py"), True, 2, 3),
        ("shell", "read", ("src/a.py",), False, 4, 5),
    ]


def test_write_stdin_polls_extend_the_command_they_poll() -> None:
    trace = steps(
        call("exec_command", {"cmd": "npm test", "yield_time_ms": 1000}, "call_1", at(0)),
        result("exec_command", "call_1", at(1), "Chunk ID: a\nProcess running with session ID 83395\nOutput:\n"),
        call("write_stdin", {"session_id": 83395.0, "chars": ""}, "call_2", at(3)),
        result("write_stdin", "call_2", at(8), "Process running with session ID 83395"),
        call("write_stdin", {"session_id": 83395.0, "chars": ""}, "call_3", at(9)),
        result("write_stdin", "call_3", {**at(10), "exit_code": 1.0, "is_error": True}),
        call("write_stdin", {"session_id": 7, "chars": "y\n"}, "call_4", at(11)),
    )
    events = events_from_steps(trace)
    assert as_tuples(events) == [
        ("exec_command", "test", (), False, 0, 5),
        ("write_stdin", "run", (), True, 6, None),  # polls a session no call started here
    ]
    assert events[0].event.duration_s == 10.0


# --- untimed traces and event validation --------------------------------------------------------


def test_untimed_calls_are_ordered_by_step_index_and_take_no_time() -> None:
    trace = steps(
        ("user", "hi", None, None, None, {}),
        call("Read", {"file_path": "a.py"}, "t1", {}),
        result("Read", "t1", {}),
        call("Edit", {"file_path": "a.py"}, "t2", at(5)),
        result("Edit", "t2", {"timestamp": "not a time"}),
    )
    events = [item.event for item in events_from_steps(trace)]
    assert [event.timestamp for event in events] == [EPOCH + timedelta(seconds=1), T0 + timedelta(seconds=5)]
    assert [event.duration_s for event in events] == [0.0, 0.0]


def test_timestamps_without_a_zone_are_utc_and_durations_never_negative() -> None:
    trace = steps(
        call("Read", {"file_path": "a.py"}, "t1", {"timestamp": "2026-02-12T16:02:51"}),
        result("Read", "t1", {"timestamp": "2026-02-12T16:02:50+00:00"}),
    )
    event = events_from_steps(trace)[0].event
    assert event.timestamp == datetime(2026, 2, 12, 16, 2, 51, tzinfo=UTC)
    assert event.duration_s == 0.0


def test_steps_covered_spans_from_the_first_call_to_the_last_result() -> None:
    trace = steps(
        call("Read", {"file_path": "a.py"}, "t1", at(0)),
        result("Read", "t1", at(1)),
        call("Read", {"file_path": "b.py"}, "t2", at(2)),
        call("Read", {"file_path": "c.py"}, "t3", at(3)),
        result("Read", "t3", at(4)),
    )
    events = events_from_steps(trace)
    assert steps_covered(events, (0, 1)) == (0, 2)
    assert steps_covered(events, (1, 2)) == (2, 4)
    with pytest.raises(ValueError, match="positions is empty"):
        steps_covered(events, ())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timestamp": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"duration_s": -0.5}, "duration_s"),
        ({"duration_s": math.nan}, "duration_s"),
        ({"duration_s": math.inf}, "duration_s"),
    ],
)
def test_trajectory_event_rejects_naive_times_and_bad_durations(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "timestamp": T0,
        "role": "agent",
        "action": "edit",
        "target_files": (),
        "success": True,
        "duration_s": 1.0,
        **changes,
    }
    with pytest.raises(ValueError, match=message):
        TrajectoryEvent(**fields)


def test_trajectory_event_stores_target_files_as_a_tuple() -> None:
    event = TrajectoryEvent(T0, "agent", "edit", ["a.py", "b.py"], True, 0.0)  # type: ignore[arg-type]
    assert event.target_files == ("a.py", "b.py")
    assert hash(event) == hash(TrajectoryEvent(T0, "agent", "edit", ("a.py", "b.py"), True, 0.0))


# --- real transcripts ---------------------------------------------------------------------------


def real_trace(adapter: str, relative: str) -> tuple[list[TraceStep], dict[str, Any]]:
    """A real fixture as the labeler receives it: parsed by ingest, then through the Step message."""
    trace = ADAPTERS[adapter].parse(real_fixture(relative))[0]
    converted = []
    for index, step in enumerate(trace.steps):
        message = common_pb2.Step(
            id=f"step-{index}",
            index=index,
            role=_PROTO_ROLES[step.role],
            content=step.content,
            tool_name=step.tool_name,
            tool_call_id=step.tool_call_id,
        )
        if step.tool_input is not None:
            json_format.ParseDict(dict(step.tool_input), message.tool_input)
        json_format.ParseDict(dict(step.metadata), message.metadata)
        converted.append(step_from_proto(message))
    return converted, dict(trace.metadata)


def replayed_patterns(events: list[Any]) -> set[str]:
    log = TaskLog("fixture")
    found: set[str] = set()
    for item in events:
        log.append(item.event)
        found.update(match.pattern.name for match in log.analyze())
    return found


def test_claude_code_subagent_transcript() -> None:
    trace, metadata = real_trace("claude_code", "claude-code/spotter-v2.1-sidechain-agent-a2898e3.jsonl")
    events = events_from_steps(trace, role=metadata["agent_id"])
    assert len(events) == 21
    assert {item.event.role for item in events} == {"a2898e3"}
    assert [item.tool_name for item in events].count("Glob") == 8
    failed = [item for item in events if not item.event.success]
    assert len(failed) == 8 and {item.tool_name for item in failed} == {"Read"}
    assert failed[0].call_index == 4
    assert failed[0].event.target_files == (
        "/home/USER/projects/spotter-worktrees/spotter-dov/lib/spotter_web/live/session_live.html.heex",
    )
    assert (events[-1].result_index, events[-1].event.success) == (None, True)  # the transcript ends mid-call
    # Eight different globs are exploration, not the same call repeated; five unrelated reads in a row are thrash.
    assert replayed_patterns(events) == {"context_thrash"}


def test_claude_code_rejected_write_fails() -> None:
    trace, _ = real_trace("claude_code", "claude-code/codemie-v2.1.4-interleaved-summaries.jsonl")
    events = events_from_steps(trace)
    assert [(item.tool_name, item.event.action, item.event.success) for item in events] == [
        ("Write", "edit", False),
        ("Task", "run", True),
        ("Task", "run", True),
    ]
    assert events[0].event.target_files == ("/Users/user/repo/available-tools.md",)
    assert events[0].event.duration_s == pytest.approx(115.057)


def test_claude_code_transcript_after_compaction_skips_the_orphan_result() -> None:
    trace, _ = real_trace("claude_code", "claude-code/spotter-v2.1-compaction-window.jsonl")
    events = events_from_steps(trace)
    assert [item.event.action for item in events] == ["edit", "edit", "edit", "read", "edit"]
    assert (events[0].call_index, events[0].result_index) == (2, 3)
    assert all(item.event.success for item in events)


def test_claude_code_bash_reads_and_web_tools() -> None:
    trace, _ = real_trace("claude_code", "claude-code/spotter-v2.1-tool-heavy.jsonl")
    events = events_from_steps(trace)
    assert [(item.tool_name, item.event.action) for item in events] == [
        ("Bash", "run"),
        ("Bash", "read"),
        ("WebSearch", "search"),
        ("Glob", "search"),
        ("Read", "read"),
        ("WebFetch", "read"),
    ]
    assert events[1].event.target_files == ("/tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output",)


def test_codex_tui_rollout_folds_polls_and_finds_the_failing_test_run() -> None:
    trace, _ = real_trace("codex", "codex/codemie-codex-tui-0.125-rollout.jsonl")
    events = events_from_steps(trace)
    assert len(events) == 15
    assert "write_stdin" not in {item.tool_name for item in events}
    test_run = next(item for item in events if item.event.action == "test")
    assert (test_run.call_index, test_run.result_index, test_run.event.success) == (44, 49, False)
    assert test_run.event.target_files == ("src/agents/plugins/__tests__/codemie-code-reasoning.test.ts",)
    assert [item.call_index for item in events if not item.event.success] == [12, 44]
    edits = [item.event.target_files for item in events if item.tool_name == "apply_patch"]
    assert edits == [
        ("src/agents/plugins/__tests__/codemie-code-reasoning.test.ts",),
        ("src/agents/plugins/codemie-code.plugin.ts",),
        ("src/agents/plugins/opencode/opencode.plugin.ts",),
    ]
    assert replayed_patterns(events) == set()


def test_codex_desktop_rollout_reads_one_file_in_pages() -> None:
    trace, _ = real_trace("codex", "codex/codemie-codex-desktop-0.128-rollout.jsonl")
    events = events_from_steps(trace)
    assert len(events) == 11
    pages = [item for item in events if item.event.target_files and item.event.target_files[0].endswith("Prep.vtt")]
    assert len(pages) == 9  # wc -l and eight `sed -n` pages of the same transcript
    assert all(item.event.success for item in events)
    assert replayed_patterns(events) == set()  # different pages are different calls


def test_codex_redacted_rollout_keeps_verbs_without_files() -> None:
    trace, _ = real_trace("codex", "codex/localpush-codex-desktop-0.104-redacted-compaction-images.jsonl")
    events = events_from_steps(trace)
    assert [item.event.action for item in events].count("edit") == 4
    assert {item.event.target_files for item in events} == {()}
    assert len(events) == 13
