"""Trace sections on real recordings: ingest's adapters parse them, the labeler groups their steps."""

from dataclasses import replace
from typing import Any

from stash_common.steps import TraceStep
from stash_ingest.adapters.registry import get_adapter
from stash_labeler.sections import TASK_LABEL_KEY, Section, group_sections
from support.fixtures import real_fixture


def _steps(adapter: str, fixture: str) -> list[TraceStep]:
    (trace,) = get_adapter(adapter).parse(real_fixture(fixture))
    return [
        TraceStep(
            id=f"s{index}",
            index=index,
            role=step.role,  # type: ignore[arg-type]
            content=step.content,
            tool_name=step.tool_name,
            tool_input=dict(step.tool_input) if step.tool_input else None,
            tool_call_id=step.tool_call_id,
            metadata=dict(step.metadata),
        )
        for index, step in enumerate(trace.steps)
    ]


def _tree(section: Section) -> Any:
    """(title, source, first..last, graded, children) with step ids as their indexes."""
    span = f"{section.first_step_id[1:]}..{section.last_step_id[1:]}"
    children = [_tree(child) for child in section.children]
    return (section.title, section.title_source, span, section.graded, *([children] if children else []))


def _covers_every_step_once(steps: list[TraceStep], tasks: list[Section]) -> None:
    leaves = [leaf for task in tasks for leaf in (task.children or (task,))]
    assert [step_id for leaf in leaves for step_id in leaf.step_ids] == [step.id for step in steps]
    assert all(task.step_ids == tuple(i for c in task.children for i in c.step_ids) for task in tasks if task.children)


def test_a_multi_request_claude_code_session_has_one_task_per_request_and_progress_subtasks() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-task-subagent-parent.jsonl")

    tasks = group_sections(steps)

    _covers_every_step_once(steps, tasks)
    assert [_tree(task) for task in tasks] == [
        (
            "/handgemacht:create-beads",
            "request",
            "0..32",
            True,
            [
                ("I'll research the setup options and then draft beads for you.", "progress", "0..10", True),
                (
                    "Let me check the current project state and whether any of these are already…",
                    "progress",
                    "11..17",
                    True,
                ),
                ("Let me check if any of these packages have Igniter installers.", "progress", "18..20", True),
                ("Good - I have enough context now. Key findings:", "progress", "21..23", True),
                ("Now let me draft the beads.", "progress", "24..26", True),
                ("Good. Let me write the plan for your approval.", "progress", "27..32", True),
            ],
        ),
        ("create the beads", "request", "33..42", True),
    ]


def test_work_changes_split_a_task_without_progress_messages_and_a_command_alone_is_context() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-tool-heavy.jsonl")

    tasks = group_sections(steps)

    _covers_every_step_once(steps, tasks)
    assert [_tree(task) for task in tasks] == [
        (
            "start phoenix in background",
            "request",
            "0..7",
            True,
            [
                ("start phoenix in background", "request", "0..2", True),
                ("Phoenix server is starting in the background.", "progress", "3..7", True),
            ],
        ),
        ("/mcp", "request", "8..11", False),
        (
            "scrolling back in xterm.js still does not work (maybe because outer web…",
            "request",
            "12..21",
            True,
            [
                ("Browsing web search", "activity", "12..13", True),
                ("Inspecting *.js", "activity", "14..18", True),
                ("Browsing github.com", "activity", "19..21", True),
            ],
        ),
    ]


def test_a_codex_rollout_keeps_a_continuous_run_of_inspection_together_and_titles_the_request() -> None:
    steps = _steps("codex", "codex/codemie-codex-desktop-0.128-rollout.jsonl")

    tasks = group_sections(steps)

    _covers_every_step_once(steps, tasks)
    assert [_tree(task) for task in tasks] == [
        (
            "analyze trascript and summarzie action items related to codemie and demo…",
            "request",
            "0..23",
            True,
        ),
        (
            "there is a need for nikita to draft demo scenario around governance,…",
            "request",
            "24..25",
            True,
        ),
        (
            "use app tools to go to Analytics and Project management tabs in codemie…",
            "request",
            "26..26",
            False,
        ),
    ]


def test_a_single_task_subagent_trace_is_one_task_holding_its_subtasks() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-sidechain-agent-a2898e3.jsonl")

    tasks = group_sections(steps)

    _covers_every_step_once(steps, tasks)
    assert [_tree(task) for task in tasks] == [
        (
            "Very thorough exploration. I need to understand:",
            "request",
            "0..44",
            True,
            [
                (
                    "I'll conduct a thorough exploration of the transcript rendering system. Let me…",
                    "progress",
                    "0..19",
                    True,
                ),
                ("Let me find the correct paths for the missing files.", "progress", "20..36", True),
                (
                    "Now let me read all the found files. Let me also check if SessionLive uses…",
                    "progress",
                    "37..44",
                    True,
                ),
            ],
        )
    ]
    assert {child.activity for child in tasks[0].children} == {"inspecting"}


def test_work_after_a_compaction_without_a_request_is_titled_by_its_first_progress_message() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-compaction-window.jsonl")

    (task,) = group_sections(steps)

    assert (task.title, task.title_source, task.graded) == (
        "Now I have the full picture. Let me implement all the pieces. I'll update:",
        "progress",
        True,
    )
    assert len(task.children) == 4


def test_explicit_task_labels_take_precedence_over_requests() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-tool-heavy.jsonl")
    labelled = [
        replace(step, metadata={**step.metadata, TASK_LABEL_KEY: "Run the app" if step.index < 12 else "Fix scroll"})
        if step.index in (0, 12)
        else step
        for step in steps
    ]

    tasks = group_sections(labelled)

    _covers_every_step_once(labelled, tasks)
    assert [(task.title, task.title_source, task.first_step_id, task.last_step_id) for task in tasks] == [
        ("Run the app", "label", "s0", "s11"),
        ("Fix scroll", "label", "s12", "s21"),
    ]
    assert [child.title for child in tasks[0].children] == [
        "start phoenix in background",
        "Phoenix server is starting in the background.",
    ]


def test_step_ids_are_untouched_and_a_leading_system_message_stays_with_the_first_request() -> None:
    steps = _steps("codex", "codex/codemie-codex-desktop-0.128-rollout.jsonl")
    system = TraceStep(id="system-prompt", index=0, role="system", content="You are Codex.")

    tasks = group_sections([system, *steps])

    assert (tasks[0].title, tasks[0].title_source, tasks[0].graded) == (
        "analyze trascript and summarzie action items related to codemie and demo…",
        "request",
        True,
    )
    assert tasks[0].step_ids == ("system-prompt", *(step.id for step in steps[:24]))
    assert len(tasks) == 3


def test_leading_context_stays_with_the_first_labelled_task_too() -> None:
    steps = _steps("claude_code", "claude-code/spotter-v2.1-tool-heavy.jsonl")
    system = TraceStep(id="system-prompt", index=0, role="system", content="You are Claude Code.")
    labelled = [
        replace(step, metadata={**step.metadata, TASK_LABEL_KEY: "Run the app" if step.index < 12 else "Fix scroll"})
        if step.index in (0, 12)
        else step
        for step in steps
    ]

    tasks = group_sections([system, *labelled])

    assert [(task.title, task.first_step_id, task.last_step_id) for task in tasks] == [
        ("Run the app", "system-prompt", "s11"),
        ("Fix scroll", "s12", "s21"),
    ]


def test_leading_work_without_a_request_stays_a_task_of_its_own() -> None:
    steps = [
        TraceStep(id="a", index=0, role="system", content="You are an agent."),
        TraceStep(id="b", index=1, role="assistant", content="Resuming: the build is green, publishing now."),
        TraceStep(id="c", index=2, role="user", content="Thanks. Now update the changelog."),
        TraceStep(id="d", index=3, role="assistant", content="Done."),
    ]

    tasks = group_sections(steps)

    assert [(task.step_ids, task.graded) for task in tasks] == [(("a", "b"), True), (("c", "d"), True)]
